#!/usr/bin/env python3
"""Converts scikit-learn's bundled 8x8 digits (sklearn/datasets/data/digits.csv.gz,
a copy of the UCI "Optical Recognition of Handwritten Digits" test set) into the
image array files of ot/data.h: data/digits/train.otimg and data/digits/heldout.otimg.

The split is fixed: a permutation of the 1797 images by numpy's
RandomState(0).permutation; the first 1500 train, the other 297 are held out.

Usage: python tools/make_digits.py [OUT_DIR]   (any Python with scikit-learn and numpy)
"""
import gzip
import os
import struct
import sys

import numpy as np
import sklearn.datasets


def write(path, pix, labels, classes, maxval):
    n, h, w = pix.shape
    with open(path, "wb") as f:
        f.write(b"OTIMG01\n")
        f.write(struct.pack("<6I", n, h, w, 1, classes, maxval))
        f.write(pix.astype(np.uint8).tobytes())
        f.write(labels.astype("<u2").tobytes())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "digits")
    src = os.path.join(os.path.dirname(sklearn.datasets.__file__), "data", "digits.csv.gz")
    with gzip.open(src, "rt") as f:
        rows = np.loadtxt(f, delimiter=",", dtype=np.int64)
    pix, labels = rows[:, :64].reshape(-1, 8, 8), rows[:, 64]
    assert pix.shape[0] == 1797 and pix.min() >= 0 and pix.max() <= 16
    perm = np.random.RandomState(0).permutation(len(labels))
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "train.otimg"), pix[perm[:1500]], labels[perm[:1500]], 10, 16)
    write(os.path.join(out, "heldout.otimg"), pix[perm[1500:]], labels[perm[1500:]], 10, 16)
    print("sklearn %s: %s -> %s (1500 train, 297 held out)" % (sklearn.__version__, src, out))


if __name__ == "__main__":
    main()
