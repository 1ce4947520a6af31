# docsync: the PostgreSQL extension (logical decoding output plugin + SQL API), built with PGXS.
#   make && make install          build and install the extension, then build the worker with CMake
#                                 (Release, into build/release) and install docsync-worker into
#                                 $(PREFIX)/bin (PREFIX=/usr/local); DESTDIR is honoured by both
#   make install WORKER=no        install only the extension
#   make installcheck             run regress/ against a running server (PGHOST/PGPORT)
# The worker is built with CMake (CMakeLists.txt).

EXTENSION = docsync
EXTVERSION = 0.2

MODULE_big = docsync
OBJS = \
	plugin/docsync.o \
	plugin/batch.o \
	plugin/closure.o \
	plugin/ddl.o \
	plugin/ddl_derive.o \
	plugin/decode.o \
	plugin/definer.o \
	plugin/derive.o \
	plugin/derive_cover.o \
	plugin/derive_path.o \
	plugin/derive_terms.o \
	plugin/derive_order.o \
	plugin/derive_walk.o \
	plugin/options.o \
	plugin/reader.o \
	plugin/relcolumns.o \
	plugin/records.o \
	plugin/relmap.o \
	plugin/sqlapi.o \
	plugin/status.o \
	plugin/status_file.o \
	plugin/tables_syntax.o \
	plugin/wait.o

# The install script is generated: the parts of sql/parts/, each holding one concern, concatenated
# in name order (rule below). Update scripts (sql/docsync--A--B.sql) and the install scripts of
# released versions (sql/docsync--0.1.sql, frozen as released, so that the update chain is tested
# from what users have: tests/scenarios/sql_upgrade.sh) are plain files, installed as they are.
SQL_PARTS = $(sort $(wildcard sql/parts/*.sql))
DATA_built = sql/docsync--$(EXTVERSION).sql
DATA = $(filter-out $(DATA_built),$(wildcard sql/docsync--*.sql))

REGRESS = $(patsubst regress/sql/%.sql,%,$(sort $(wildcard regress/sql/*.sql)))
REGRESS_OPTS = --inputdir=regress --outputdir=regress

PG_CPPFLAGS += -I$(srcdir)/shared -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
# WERROR=yes (packaging/run-tests.sh, development): warnings are errors
ifeq ($(WERROR),yes)
PG_CPPFLAGS += -Werror
endif
EXTRA_CLEAN = regress/results regress/regression.diffs regress/regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header: the analysis's files share their structures through derive.h.
plugin/derive.o plugin/derive_cover.o plugin/derive_order.o plugin/derive_path.o plugin/derive_terms.o plugin/derive_walk.o: plugin/derive.h

# docsync.control lives at the top; PGXS installs $(EXTENSION).control from there.

# After the PGXS include, so `all` stays the default goal; `make clean` removes it (DATA_built).
sql/docsync--$(EXTVERSION).sql: $(SQL_PARTS)
	cat $(SQL_PARTS) > $@.tmp && mv $@.tmp $@

# `make portable`: sql/docsync-portable.sql, the SQL-only install for servers that load no docsync
# library (docs/portable.md): the same parts, each C function, event trigger and superuser-only call
# replaced where it stood by its portable form from sql/portable/*.sql.
PORTABLE_FORMS = $(sort $(wildcard sql/portable/*.sql))
.PHONY: portable
portable: sql/docsync-portable.sql
sql/docsync-portable.sql: $(SQL_PARTS) $(PORTABLE_FORMS) sql/portable/build.py
	python3 $(srcdir)/sql/portable/build.py $@ --forms $(srcdir)/sql/portable $(SQL_PARTS)
EXTRA_CLEAN += sql/docsync-portable.sql

# `make install` also installs the worker. After the PGXS include, so `all` stays the default goal.
PREFIX ?= /usr/local
WORKER ?= yes
WORKER_BUILD ?= build/release
ifeq ($(WORKER),yes)
install: install-worker
endif
.PHONY: install-worker
install-worker:
	cmake -S $(srcdir) -B $(WORKER_BUILD) -DCMAKE_BUILD_TYPE=Release -DDOCSYNC_TESTS=OFF >/dev/null
	cmake --build $(WORKER_BUILD) -j $$(nproc)
	DESTDIR=$(DESTDIR) cmake --install $(WORKER_BUILD) --prefix $(PREFIX)
