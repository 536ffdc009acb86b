# A child's attack on the agent's socket (docs/security.md), run as an unprivileged account by the end-to-end
# test (HostileSocketTests) and by `curfew-bench login`: one connection that sends a byte every 1.5 s
# (reopened whenever the agent closes it) plus COUNT connections opened and held, reopened every 250 ms
# when closed; twice a second a line of what the agent did to them.
# Usage: python3 socket_attack.py SOCKET COUNT
import os, socket, sys, time
path, count = sys.argv[1], int(sys.argv[2])
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
        return s
    except OSError:  # EAGAIN: the backlog is full
        s.close()
        return None
def closed(s):
    try:
        s.recv(4096)  # the agent's busy line, or the end: the agent closed it
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True
slow, slow_since, last_byte, lifetimes = None, 0.0, 0.0, []
held, opened, cut, full = [], 0, 0, 0
start = time.monotonic(); next_refill = start; next_report = start
while True:
    now = time.monotonic()
    if slow is not None and closed(slow):
        lifetimes.append(round(now - slow_since, 2)); slow.close(); slow = None
    if slow is None:
        slow = connect(); slow_since = now; last_byte = 0.0
    if slow is not None and now - last_byte >= 1.5:
        try: slow.send(b'{')
        except OSError: pass
        last_byte = now
    if now >= next_refill:
        alive = []
        for s in held:
            if closed(s): s.close(); cut += 1
            else: alive.append(s)
        held = alive
        while len(held) < count:
            s = connect()
            if s is None: full += 1; break
            held.append(s); opened += 1
        next_refill = now + 0.25
    if now >= next_report:
        longest = max(lifetimes) if lifetimes else 0
        print(f"held={len(held)} opened={opened} cut={cut} full={full} slow-cut={len(lifetimes)} slow-longest={longest} slow={lifetimes}", flush=True)
        next_report = now + 0.5
    time.sleep(0.05)
