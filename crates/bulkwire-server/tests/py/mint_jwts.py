"""HS256 JWTs for crates/bulkwire-server/tests/permissions.rs, made by PyJWT (never by
bulkwire's own code), so that the server's `[auth] jwt_secret` path is checked against an
independent implementation of RFC 7519.

    python mint_jwts.py SECRET '{"name": {"sub": "ann", "scope": "upload read", "exp_in": 3600}}'

`exp_in` is seconds from now (negative: already expired). Prints one JSON line:
{"ok": true, "tokens": {name: token}}.
"""

import json
import sys
import time

import jwt

secret, wanted = sys.argv[1], json.loads(sys.argv[2])
now = int(time.time())
tokens = {}
for name, c in wanted.items():
    claims = {"sub": c["sub"], "scope": c["scope"], "iat": now, "exp": now + c["exp_in"]}
    tokens[name] = jwt.encode(claims, secret, algorithm="HS256")
print(json.dumps({"ok": True, "tokens": tokens}))
