"""moto's server with DynamoDB requests serialised.

moto checks a write's condition and applies the write in separate steps,
without a lock, while its server handles requests on many threads: two
concurrent conditional writes can both pass their condition. Real DynamoDB
never allows that, and Baton's protocol (leases, versions, dedupe keys)
relies on it. The tests therefore run moto through this wrapper, which lets
one DynamoDB request at a time through; other services (SQS long polls
included) stay concurrent.

Usage: python moto_serialized.py [moto_server arguments]
"""

import sys
import threading

from moto import server

_dynamodb = threading.Lock()
_Base = server.DomainDispatcherApplication


class _Serialised(_Base):
    def __call__(self, environ, start_response):
        if environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB"):
            with _dynamodb:
                # Drain the response inside the lock: the write happens
                # while the body is produced.
                return list(super().__call__(environ, start_response))
        return super().__call__(environ, start_response)


server.DomainDispatcherApplication = _Serialised

if __name__ == "__main__":
    server.main(sys.argv[1:])
