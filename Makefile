# docsync: the PostgreSQL extension (logical decoding output plugin + SQL API), built with PGXS.
#   make && make install          build and install the extension
#   make installcheck             run regress/ against a running server (PGHOST/PGPORT)
# The worker is built with CMake (CMakeLists.txt).

EXTENSION = docsync
EXTVERSION = 0.1

MODULE_big = docsync
OBJS = \
	plugin/docsync.o \
	plugin/decode.o \
	plugin/options.o \
	plugin/relmap.o \
	plugin/sqlapi.o \
	plugin/status.o

DATA = $(wildcard sql/docsync--*.sql)

REGRESS = $(patsubst regress/sql/%.sql,%,$(sort $(wildcard regress/sql/*.sql)))
REGRESS_OPTS = --inputdir=regress --outputdir=regress

PG_CPPFLAGS += -I$(srcdir)/shared -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers
EXTRA_CLEAN = regress/results regress/regression.diffs regress/regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# docsync.control lives at the top; PGXS installs $(EXTENSION).control from there.
