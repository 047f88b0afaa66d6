# sources.cmake — the source files of the modules that other builds compile too (the fuzz
# targets in tests/fuzz build them with clang), paths relative to the repository root: one list.
set(AT_BASE_SOURCES base/util.c base/sbuf.c)
set(AT_SPACE_SOURCES tuner/space/expr.c tuner/space/space.c)
set(AT_STORE_SOURCES cache/db.c cache/dbfile.c cache/keys.c cache/record.c cache/kt_export.c
                     cache/recording.c cache/bundle.c)
