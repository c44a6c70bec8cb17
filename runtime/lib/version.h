/* version.h - rota's version: the one place it is defined (rota --version, rotad --version, CHANGES.md). */
#ifndef ROTA_VERSION_H
#define ROTA_VERSION_H

#define ROTA_VERSION "0.9.0"

#endif
