"""moto_server with its requests handled one at a time, as S3 orders conditional writes.

moto checks If-Match / If-None-Match in a step apart from the write, on parallel threads, so two racing
conditional writes can both win there; one lock around its WSGI application removes races S3 cannot have.
Usage: python3 serial_moto.py PORT   (binds 127.0.0.1 only)
"""
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

LOCK = threading.Lock()
APP = DomainDispatcherApplication(create_backend_app)


def serial(environ, start_response):
    captured = {}
    written = []

    def capture(status, headers, exc_info=None):
        captured["answer"] = (status, headers)
        return written.append

    with LOCK:
        # The whole answer is produced under the lock: moto may do its work while the body is iterated.
        result = APP(environ, capture)
        try:
            body = b"".join(written) + b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
    start_response(*captured["answer"])
    return [body]


if __name__ == "__main__":
    run_simple("127.0.0.1", int(sys.argv[1]), serial, threaded=True)
