"""moto server whose KMS keys make their private key when an operation first needs it, not when the key is created:

  python tests/support/moto_lazy_keys.py -H 127.0.0.1 -p PORT

moto 5.2.5 gives every KMS key an asymmetric private key as it creates it, a symmetric one included
(`Key.__init__`: `self.private_key = generate_private_key(self.key_spec)`, an RSA-2048 key for SYMMETRIC_DEFAULT), and
reads it only in Sign, Verify and GetPublicKey. Generating an RSA-2048 key costs ~50 ms of CPU, so the nine keys of
the default platform's stand-in stacks (tests/support/destroy_harness.py) cost ~0.45 s of the server's ~0.6 s for
each deployment, once per test. Here the key is generated on first use, under a lock (the server is threaded), and
kept: every answer is moto's own, only later. tests/test_moto_lazy_keys.py checks that signing, verifying and the
public key still agree.
"""

from __future__ import annotations

import sys
import threading
from typing import Any


def make_private_keys_lazily() -> None:
    from moto.kms import models, utils

    lock = threading.Lock()

    def private_key(key: Any) -> Any:
        with lock:
            made = key.__dict__.get("_lazy_private_key")
            if made is None:
                made = key.__dict__["_lazy_private_key"] = utils.generate_private_key(key.key_spec)
            return made

    def set_private_key(key: Any, value: Any) -> None:
        key.__dict__["_lazy_private_key"] = value

    models.generate_private_key = lambda key_spec: None  # what Key.__init__ assigns: made on first read
    models.Key.private_key = property(private_key, set_private_key)


if __name__ == "__main__":
    make_private_keys_lazily()
    from moto.server import main

    main(sys.argv[1:])
