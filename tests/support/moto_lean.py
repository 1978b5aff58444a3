"""moto's server without five costs of moto 5.2.5 that change no answer, for the tests' moto servers (moto_server.py's,
and moto_cloudformation.py's on top of it):

  python tests/support/moto_lean.py -H 127.0.0.1 -p PORT

1. A KMS key's private key is made when an operation first needs it, not when the key is created. moto gives every
   key an asymmetric private key as it creates it, a symmetric one included (`Key.__init__`: `self.private_key =
   generate_private_key(self.key_spec)`, an RSA-2048 key for SYMMETRIC_DEFAULT), and reads it only in Sign, Verify
   and GetPublicKey. An RSA-2048 key costs ~50 ms of CPU: the nine keys of the default platform's stand-in stacks
   (destroy_harness.py) were ~0.45 s of the server's ~0.6 s for each test's deployment. Here it is made on first
   read, under a lock (the server is threaded), and kept.
2. moto's list of its service modules is read once. The server asks for it twice per request
   (`DomainDispatcherApplication.get_backend_for_host`: `host in backends.list_of_moto_modules()`), and each time
   lists moto's package directory and stats its ~175 entries: ~40 % of the server's CPU for an S3 HeadObject
   (4.5 -> 2.7 ms). The installed package does not change while the server runs.
3. botocore's data (endpoints.json, 1.2 MB, and the service models moto reads) is read through one loader per data
   path instead of one per botocore session. moto makes a new boto3 Session wherever it asks botocore which regions
   or services there are (EC2's region table at import, each backend's regions, the service names), and each new
   session reads endpoints.json and lists botocore's data directories again: ~1 s of the server's CPU when its
   CloudFormation first loads (it imports EC2 and the other services it can create). moto's own loader (botocore's
   data with moto's extras, moto/core/loaders.py) is made anew for each service whose model a request first needs,
   and lists botocore's ~400 service directories each time: one loader for them all, ~0.4 s less over 15 services.
   What a loader holds is the installed data, the same for every session and service (support/moto_server.py's
   `session` does the same for the tests' own sessions).
4. A response class's method names are listed once. Each request moto answers through `BaseResponse.call_action`
   (every query and JSON protocol service: CloudFormation, EC2, IAM, SageMaker, ...) lists its response class's
   functions with `inspect.getmembers` to see whether the action is one (0.6 ms for EC2's ~300 methods, 0.1 ms for
   a small class). The classes' methods are defined when moto imports them; moto_cloudformation.py's patches replace
   existing ones before the first CloudFormation request.
5. No line per request on stderr. werkzeug's server logs every request it answers at INFO (~0.17 ms of the server's
   CPU each, ~3 % of it over the tests' ~3,000 requests a worker); nobody reads them: moto_server.py shows the
   server's output only when it ends before it answers. Its warnings and errors (a request that raised) still print.

tests/test_moto_lean.py checks all five: signing, verifying and the public key still agree (symmetric keys still
encrypt and decrypt); the kept list of modules is the one a fresh listing gives, with moto's directory not listed
again; the method names kept are those a fresh listing gives, listed once per class; sessions share one loader per
data path, and the server's EC2 regions are those a fresh session lists; a request line is not logged, an error is.
"""

from __future__ import annotations

import functools
import logging
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


def list_moto_modules_once() -> None:
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def list_response_methods_once() -> None:
    from moto.core import responses

    # the list is only searched (`action in method_names`), never changed
    responses.method_names_from_class = functools.cache(responses.method_names_from_class)


def read_botocore_data_once() -> None:
    import botocore.session
    from moto.core import utils

    # botocore.session calls its module's create_loader(data_path) as each session first needs its data; moto's
    # get_service_model and get_pagination_model call moto.core.utils.create_loader() (botocore's data with moto's
    # extras) for each service they load.
    botocore.session.create_loader = functools.cache(botocore.session.create_loader)
    utils.create_loader = functools.cache(utils.create_loader)


def no_request_log() -> None:
    # werkzeug sets its logger to INFO only while no level is set; it still adds its stderr handler for what passes
    logging.getLogger("werkzeug").setLevel(logging.WARNING)


def lean() -> None:
    make_private_keys_lazily()
    list_moto_modules_once()
    list_response_methods_once()
    read_botocore_data_once()
    no_request_log()


if __name__ == "__main__":
    lean()
    from moto.server import main

    main(sys.argv[1:])
