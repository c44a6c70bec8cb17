# rotabench - rota's benchmark harness as a package: mix, runner, metrics, report, plots, trace (scripts/bench runs it).
