#!/usr/bin/env python3
"""A TCP relay on 127.0.0.1 that delays each direction by a set time: a link with latency.

    python3 bench/relay.py --target-port 2222 [--delay-ms 0.5] [--port 0] [--port-file F]
    python3 bench/relay.py --selftest          # round trips direct and through the relay

It listens on 127.0.0.1 only and forwards every connection to 127.0.0.1:TARGET-PORT.
Each direction of a connection has a reader thread and a sender thread: the reader
stamps every chunk it receives with the time it may leave (now + delay) and queues it;
the sender waits for the stamp of the oldest chunk and sends every chunk whose time has
come. The reader never waits for the sender, so the delay is added to each byte once,
whatever the amount in flight: a link with latency, not a slower link (no bandwidth
limit, no serialisation of the stream). Standard library only, Python 3.6+.

bench/suite.py puts it between sshfs and a private sshd (the latency-bound section);
it is stopped by its pid. On SIGTERM or SIGINT it writes what it did (connections,
bytes and chunks per direction, the delay actually held: mean, median, p99, max) as
JSON to --stats-file, and exits.
"""

import argparse
import collections
import ctypes
import json
import os
import signal
import socket
import statistics
import sys
import threading
import time

LOOPBACK = "127.0.0.1"
CHUNK = 1 << 16
PR_SET_TIMERSLACK = 29        # <linux/prctl.h>
SAMPLES_KEPT = 100000         # held delays kept for the percentiles (per direction)


class Direction(object):
    """One way of one connection: SRC is read, DST written, DELAY seconds later."""

    def __init__(self, name, src, dst, delay, stats):
        self.name, self.src, self.dst, self.delay = name, src, dst, delay
        self.queue = collections.deque()     # (time it may leave, bytes or None = EOF)
        self.cond = threading.Condition()
        self.stats = stats

    def read_loop(self):
        try:
            while True:
                data = self.src.recv(CHUNK)
                with self.cond:
                    self.queue.append((time.monotonic() + self.delay, data or None))
                    self.cond.notify()
                if not data:
                    return
        except OSError:
            with self.cond:
                self.queue.append((time.monotonic(), None))
                self.cond.notify()

    def send_loop(self):
        held = self.stats.held[self.name]
        try:
            while True:
                with self.cond:
                    while not self.queue:
                        self.cond.wait()
                    due = self.queue[0][0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                now = time.monotonic()
                chunks, eof = [], False
                with self.cond:
                    while self.queue and self.queue[0][0] <= now:
                        stamp, data = self.queue.popleft()
                        if data is None:
                            eof = True
                            break
                        chunks.append(data)
                        if len(held) < SAMPLES_KEPT:
                            held.append(now - (stamp - self.delay))
                if chunks:
                    payload = b"".join(chunks)
                    self.dst.sendall(payload)
                    self.stats.add(self.name, len(payload), len(chunks))
                if eof:
                    self.dst.shutdown(socket.SHUT_WR)
                    return
        except OSError:
            pass


class Stats(object):
    def __init__(self):
        self.lock = threading.Lock()
        self.connections = 0
        self.bytes = {"up": 0, "down": 0}
        self.chunks = {"up": 0, "down": 0}
        self.held = {"up": [], "down": []}

    def add(self, name, nbytes, nchunks):
        with self.lock:
            self.bytes[name] += nbytes
            self.chunks[name] += nchunks

    def as_dict(self, delay):
        out = {"delay_ms": delay * 1e3, "connections": self.connections,
               "bytes": dict(self.bytes), "chunks": dict(self.chunks), "held_ms": {}}
        for name, held in self.held.items():
            if held:
                s = sorted(held)
                out["held_ms"][name] = {
                    "mean": statistics.mean(s) * 1e3, "median": s[len(s) // 2] * 1e3,
                    "p99": s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3, "max": s[-1] * 1e3,
                    "samples": len(s)}
        return out


def serve_connection(client, target_port, delay, stats):
    try:
        upstream = socket.create_connection((LOOPBACK, target_port))
    except OSError:
        client.close()
        return
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    ways = [Direction("up", client, upstream, delay, stats),
            Direction("down", upstream, client, delay, stats)]
    threads = []
    for way in ways:
        for loop in (way.read_loop, way.send_loop):
            t = threading.Thread(target=loop)
            t.daemon = True
            t.start()
            threads.append(t)
    for t in threads:
        t.join()
    client.close()
    upstream.close()


def listen(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    sock.listen(64)
    return sock


def accept_loop(sock, target_port, delay, stats):
    while True:
        try:
            client, _ = sock.accept()
        except OSError:
            return
        with stats.lock:
            stats.connections += 1
        t = threading.Thread(target=serve_connection,
                             args=(client, target_port, delay, stats))
        t.daemon = True
        t.start()


def sharpen_timers():
    """Ask for 1 us of timer slack (default 50 us), so a 0.5 ms sleep is 0.5 ms; and
    switch threads often, so a chunk due now does not wait for another thread's turn."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    sys.setswitchinterval(0.0002)


# --------------------------------------------------------------------------- self-test

def _echo_server(sock):
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return

        def echo(c):
            with c:
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while True:
                    data = c.recv(CHUNK)
                    if not data:
                        return
                    c.sendall(data)
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def _round_trips(port, count, size=64):
    s = socket.create_connection((LOOPBACK, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload = b"x" * size
    times = []
    with s:
        for _ in range(count):
            t0 = time.monotonic()
            s.sendall(payload)
            got = 0
            while got < size:
                got += len(s.recv(CHUNK))
            times.append(time.monotonic() - t0)
    return times


def _throughput(port, nbytes=64 << 20):
    """Seconds to push NBYTES through and get them echoed back (both ways at once)."""
    s = socket.create_connection((LOOPBACK, port))
    block = b"\0" * CHUNK
    t0 = time.monotonic()

    def pump():
        left = nbytes
        while left > 0:
            left -= s.send(block[:min(left, CHUNK)])
        s.shutdown(socket.SHUT_WR)
    sender = threading.Thread(target=pump, daemon=True)
    sender.start()
    got = 0
    while True:
        data = s.recv(CHUNK)
        if not data:
            break
        got += len(data)
    s.close()
    return time.monotonic() - t0, got


def selftest(delay, count):
    """Round trips of 64 bytes to an echo server, direct then through the relay: the
    relay should add about 2 x delay; and 64 MiB echoed through it (no bandwidth cap)."""
    sharpen_timers()
    echo = listen(0)
    threading.Thread(target=_echo_server, args=(echo,), daemon=True).start()
    relay = listen(0)
    stats = Stats()
    threading.Thread(target=accept_loop, args=(relay, echo.getsockname()[1], delay, stats),
                     daemon=True).start()
    direct = _round_trips(echo.getsockname()[1], count)
    relayed = _round_trips(relay.getsockname()[1], count)
    seconds, got = _throughput(relay.getsockname()[1])
    med = lambda v: statistics.median(v) * 1e3  # noqa: E731
    p99 = lambda v: sorted(v)[int(len(v) * 0.99)] * 1e3  # noqa: E731
    print("relay self-test, delay %.3f ms each way, %d round trips of 64 bytes:"
          % (delay * 1e3, count))
    print("| path | median RTT ms | p99 ms |")
    print("|---|---:|---:|")
    print("| direct | %.3f | %.3f |" % (med(direct), p99(direct)))
    print("| through the relay | %.3f | %.3f |" % (med(relayed), p99(relayed)))
    print("added by the relay: %.3f ms per round trip (expected %.3f)"
          % (med(relayed) - med(direct), 2 * delay * 1e3))
    print("64 MiB echoed through it in %.2f s (%.0f MB/s each way)"
          % (seconds, got / 1e6 / seconds))
    ok = got == 64 << 20 and med(relayed) - med(direct) >= 2 * delay * 0.9
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


# --------------------------------------------------------------------------- main

def main(argv=None):
    p = argparse.ArgumentParser(prog="relay.py", description=__doc__.splitlines()[0])
    p.add_argument("--target-port", type=int, help="forward to 127.0.0.1:PORT")
    p.add_argument("--port", type=int, default=0, help="listen on 127.0.0.1:PORT [0: any free]")
    p.add_argument("--delay-ms", type=float, default=0.5,
                   help="added to each direction, milliseconds [0.5]")
    p.add_argument("--port-file", help="write the port listened on to this file")
    p.add_argument("--stats-file", help="on SIGTERM/SIGINT, write what it did as JSON here")
    p.add_argument("--selftest", action="store_true",
                   help="measure round trips direct and through a relay, then exit")
    p.add_argument("--count", type=int, default=2000, help="--selftest round trips [2000]")
    args = p.parse_args(argv)
    delay = args.delay_ms / 1e3
    if args.selftest:
        return selftest(delay, args.count)
    if not args.target_port:
        p.error("--target-port is required")
    sharpen_timers()
    stats = Stats()
    sock = listen(args.port)

    def stop(signum, frame):
        if args.stats_file:
            with open(args.stats_file, "w") as f:
                json.dump(stats.as_dict(delay), f)
        sys.stdout.flush()
        os._exit(0)   # the daemon threads may be blocked anywhere
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = sock.getsockname()[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(args.port_file + ".tmp", args.port_file)
    print("relay 127.0.0.1:%d -> 127.0.0.1:%d, %.3f ms each way"
          % (port, args.target_port, args.delay_ms))
    sys.stdout.flush()
    accept_loop(sock, args.target_port, delay, stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
