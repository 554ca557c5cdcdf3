#!/usr/bin/env python3
"""Forwards TCP connections from this machine's loopback into a network namespace:

    netns-forward.py NETNS_FILE PORT

listens on 127.0.0.1:PORT here and connects each accepted connection to 127.0.0.1:PORT inside
the namespace that NETNS_FILE (made by `unshare --net=FILE`) holds. The real node's cluster
runs in that private namespace, so that its pods' traffic cannot leave the machine; this is how
the tests' kubectl and kube-rs reach its API server under the same address as inside.

The listening socket is made before the process enters the namespace (setns(2) moves only the
calling thread, and the threads started after it inherit it), so it stays on this side while
every socket made after it is on the other. Python 3.11 has no os.setns: libc's, by ctypes.
"""

import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def serve(client, port):
    try:
        upstream = socket.create_connection(("127.0.0.1", port))
    except OSError as e:
        print(f"netns-forward: cannot connect to 127.0.0.1:{port} in the namespace: {e}", file=sys.stderr)
        client.close()
        return
    t = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    t.start()
    pipe(client, upstream)
    t.join()
    client.close()
    upstream.close()


def main():
    netns, port = sys.argv[1], int(sys.argv[2])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(netns, os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        sys.exit(f"netns-forward: setns({netns}) failed: {os.strerror(err)} (run as root)")
    os.close(fd)
    print(f"forwarding 127.0.0.1:{port} into {netns}", flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, port), daemon=True).start()


if __name__ == "__main__":
    main()
