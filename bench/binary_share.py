#!/usr/bin/env python3
"""Which crates the `forewarn` binary's code comes from: sums the sizes `nm -S -C` reports
for text and data symbols by crate path. Usage: python3 bench/binary_share.py [BINARY]"""
import collections, subprocess, sys

binary = sys.argv[1] if len(sys.argv) > 1 else "target/debug/forewarn"
crates = ["forewarn_simulator", "forewarn_host::cli::demo", "forewarn_host::", "forewarn_runtime",
          "forewarn_imds", "forewarn_etcd", "wasmtime", "cranelift", "axum", "hyper", "rustls", "ring"]
symbols = subprocess.run(["nm", "-S", "-C", binary], capture_output=True, text=True, check=True)
total, by_crate = 0, collections.Counter()
for line in symbols.stdout.splitlines():
    parts = line.split(None, 3)
    if len(parts) < 4 or parts[2] not in "tTrRdD":
        continue
    size = int(parts[1], 16)
    total += size
    crate = next((name for name in crates if name in parts[3]), None)
    if crate:
        by_crate[crate] += size
print(f"{'all symbols':28} {total:>10}")
for crate, size in by_crate.most_common():
    print(f"{crate:28} {size:>10} {100 * size / total:5.1f}%")
