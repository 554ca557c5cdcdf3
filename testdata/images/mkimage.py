#!/usr/bin/env python3
"""Writes a one-layer OCI image layout archive from a root filesystem directory, for
`ctr images import` on the real node: no registry, nothing pulled.

    mkimage.py ROOTFS REF OUT.tar [--cmd ARG]... [--entrypoint ARG]... [--env K=V]... [--user U]

The layout (image-spec: image-layout.md, manifest.md, config.md): `oci-layout`, `index.json`
naming the image by the annotation containerd's importer reads (`io.containerd.image.name`, the
full reference; `org.opencontainers.image.ref.name`, the tag), and in `blobs/sha256/` the
uncompressed layer, the config (linux/amd64) and the manifest. Deterministic: the layer's entries
are sorted, their times are 0 and owners kept as numbers only, so the same rootfs gives the same
digests. Prints the config digest (the image ID containerd reports) on stdout.
"""

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile


def layer(rootfs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in sorted(dirs + files):
                path = os.path.join(top, name)
                info = tar.gettarinfo(path, arcname=os.path.relpath(path, rootfs))
                info.mtime = 0
                info.uname = info.gname = ""
                if info.isreg():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def blob(tar, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest.split(":", 1)[1])
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"digest": digest, "size": len(data)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("rootfs")
    p.add_argument("ref", help="the full reference, e.g. docker.io/local/busybox:1")
    p.add_argument("out")
    p.add_argument("--cmd", action="append", default=[])
    p.add_argument("--entrypoint", action="append", default=[])
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--user", default="")
    a = p.parse_args()
    if ":" not in a.ref.rsplit("/", 1)[-1]:
        sys.exit(f"mkimage.py: {a.ref} has no tag: give the full reference, e.g. docker.io/local/busybox:1")
    data = layer(a.rootfs)
    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
    env = a.env
    if not any(e.startswith("PATH=") for e in env):
        env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + env
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": env, "Cmd": a.cmd or None, "Entrypoint": a.entrypoint or None, "User": a.user},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "testdata/images/mkimage.py"}],
    }
    config["config"] = {k: v for k, v in config["config"].items() if v}
    tmp = a.out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        l = blob(tar, data)
        c = blob(tar, json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **c},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **l}],
        }
        m = blob(tar, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json", **m,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": a.ref,
                    "org.opencontainers.image.ref.name": a.ref.rsplit(":", 1)[1],
                },
            }],
        }
        for name, content in (("oci-layout", {"imageLayoutVersion": "1.0.0"}), ("index.json", index)):
            raw = json.dumps(content, sort_keys=True).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    os.replace(tmp, a.out)
    print(c["digest"])


if __name__ == "__main__":
    main()
