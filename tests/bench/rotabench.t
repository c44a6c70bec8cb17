#!/usr/bin/env python3
# rotabench.t - runs the benchmark package's unit tests (bench/tests, python unittest) as TAP for make test.
import os
import sys
import unittest

sys.dont_write_bytecode = True  # nothing written into the source tree
src = os.environ.get("ROTA_SRCDIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class TapResult(unittest.TestResult):
    n = 0

    def line(self, test, ok, note=""):
        TapResult.n += 1
        print("%s %d - %s%s" % ("ok" if ok else "not ok", TapResult.n, test.id(), note), flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.line(test, True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.line(test, False)
        for l in self._exc_info_to_string(err, test).splitlines():
            print("# " + l)

    addError = addFailure

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.line(test, True, " # skip " + reason)


suite = unittest.defaultTestLoader.discover(os.path.join(src, "bench", "tests"),
                                            top_level_dir=os.path.join(src, "bench", "tests"))
if suite.countTestCases() == 0:
    print("Bail out! no unit tests found under %s/bench/tests" % src)
    sys.exit(255)
res = TapResult()
suite.run(res)
print("1..%d" % TapResult.n)
sys.exit(0 if res.wasSuccessful() else 1)
