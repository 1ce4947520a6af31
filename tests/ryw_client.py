"""Read-your-writes loops for tests/scenarios/worker_read_your_writes.sh and
tests/bench/read_your_writes.sh: commit an update of table item (id, v) and wait until the doc
db:item:<id> in Redis reflects it, ITERATIONS times, then print "<p50 ms> <p99 ms> <max ms>" of the
waits (from the commit's return to the doc being readable).

    ryw_client.py LIBPQ CONNINFO REDIS_PORT MODE ITERATIONS [KEYS]

The commits go round KEYS docs (default 20: ids 1 to KEYS).

MODE: procedure (CALL docsync.wait_published(), then GET: the doc must reflect the commit),
watermark (wait until docsync:watermark passes pg_current_wal_flush_lsn(), then GET: likewise), or
poll (GET the key again and again until it does: how soon the doc arrives, with no confirmation to
wait for). One libpq connection in autocommit (ctypes), plain RESP connections to Redis.
"""
import ctypes, json, socket, sys, time

libpq_path, conninfo, redis_port, mode, iterations = sys.argv[1:6]
iterations = int(iterations)
keys = int(sys.argv[6]) if len(sys.argv) > 6 else 20
pq = ctypes.CDLL(libpq_path)
pq.PQconnectdb.restype = ctypes.c_void_p
pq.PQconnectdb.argtypes = [ctypes.c_char_p]
pq.PQstatus.argtypes = [ctypes.c_void_p]
pq.PQerrorMessage.restype = ctypes.c_char_p
pq.PQerrorMessage.argtypes = [ctypes.c_void_p]
pq.PQexec.restype = ctypes.c_void_p
pq.PQexec.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
pq.PQresultStatus.argtypes = [ctypes.c_void_p]
pq.PQresultErrorMessage.restype = ctypes.c_char_p
pq.PQresultErrorMessage.argtypes = [ctypes.c_void_p]
pq.PQntuples.argtypes = [ctypes.c_void_p]
pq.PQgetvalue.restype = ctypes.c_char_p
pq.PQgetvalue.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
pq.PQclear.argtypes = [ctypes.c_void_p]

def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)

conn = pq.PQconnectdb(conninfo.encode())
if pq.PQstatus(conn) != 0:
    fail("connect: " + pq.PQerrorMessage(conn).decode())

def query(sql):
    """Runs one statement; returns the first column of the first row, or None."""
    res = pq.PQexec(conn, sql.encode())
    status = pq.PQresultStatus(res)
    if status not in (1, 2):  # PGRES_COMMAND_OK, PGRES_TUPLES_OK
        message = pq.PQresultErrorMessage(res).decode()
        pq.PQclear(res)
        fail(sql + ": " + message)
    value = pq.PQgetvalue(res, 0, 0).decode() if status == 2 and pq.PQntuples(res) > 0 else None
    pq.PQclear(res)
    return value

class Redis:
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", int(redis_port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(10)
        self.buf = b""
    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
    def line(self):
        while b"\r\n" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                fail("Redis sent nothing for 10 s")
            if not chunk:
                fail("Redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line
    def reply(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest.decode()
        if kind == b"-":
            fail("Redis: " + rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode()
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        fail("unexpected Redis reply " + repr(line))
    def command(self, *args):
        self.send(*args)
        return self.reply()

def lsn(text):
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)

redis = Redis()
subscriber = None
if mode == "watermark":
    subscriber = Redis()
    subscriber.command("SUBSCRIBE", "docsync:watermark")

waits = []
for i in range(iterations):
    key = 1 + i % keys
    value = 1000000 * {"procedure": 1, "watermark": 2, "poll": 3}[mode] + i
    query("UPDATE item SET v = %d WHERE id = %d" % (value, key))
    started = time.perf_counter()
    if mode == "procedure":
        if query("CALL docsync.wait_published()") != "t":
            fail("iteration %d: wait_published returned false" % i)
    elif mode == "poll":
        deadline = time.monotonic() + 5
        while True:
            envelope = redis.command("GET", "db:item:%d" % key)
            if envelope is not None and json.loads(envelope)["doc"] == {"id": key, "v": value}:
                break
            if time.monotonic() > deadline:
                fail("iteration %d: db:item:%d did not reflect the commit within 5 s" % (i, key))
    else:
        target = lsn(query("SELECT pg_current_wal_flush_lsn()"))
        current = redis.command("GET", "docsync:watermark")
        deadline = time.monotonic() + 5
        while current is None or lsn(current) < target:
            if time.monotonic() > deadline:
                fail("iteration %d: docsync:watermark stayed at %s, below the commit's %X/%X"
                     % (i, current, target >> 32, target & 0xFFFFFFFF))
            message = subscriber.reply()
            if message[0] == "message":
                current = message[2]
    waits.append(time.perf_counter() - started)
    envelope = redis.command("GET", "db:item:%d" % key)
    if envelope is None:
        fail("iteration %d: db:item:%d is not in Redis after the wait" % (i, key))
    doc = json.loads(envelope)["doc"]
    if doc != {"id": key, "v": value}:
        fail("iteration %d: db:item:%d is %s after the wait, the commit wrote v = %d" % (i, key, envelope, value))

waits.sort()
ms = lambda q: 1000 * waits[min(len(waits) - 1, int(q * len(waits)))]
print("%.2f %.2f %.2f" % (ms(0.50), ms(0.99), 1000 * waits[-1]))
