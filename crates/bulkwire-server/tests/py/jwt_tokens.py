"""Keys, JWK Sets and tokens for crates/bulkwire-server/tests/jwt.rs, made by PyJWT and
cryptography (never by bulkwire's own code): the verifier is checked against an independent
implementation of RFC 7515/7519.

    python jwt_tokens.py SECRET ISSUER AUDIENCE UNKNOWN_KID_TOKENS

prints one JSON line: {"ok": true, "now", "jwks", "jwks_rotated", "tokens": {name: token},
"unknown": [tokens with random unknown kids]}. Two hand-made tokens use only the standard
library, because PyJWT refuses to make them (rightly): the algorithm-confusion token (HS256
keyed with the RSA public key's PEM) and a tampered payload.
"""

import base64
import hashlib
import hmac
import json
import sys
import time
import uuid

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

secret, issuer, audience, unknown_count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
now = int(time.time())

rsa1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
rsa2 = rsa.generate_private_key(public_exponent=65537, key_size=3072)  # rotated in later
stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # in no JWKS
ec1 = ec.generate_private_key(ec.SECP256R1())
ed1 = ed25519.Ed25519PrivateKey.generate()


def jwk(algorithm, key, kid, alg=None):
    d = json.loads(algorithm.to_jwk(key.public_key()))
    d["kid"] = kid
    d["use"] = "sig"
    if alg:
        d["alg"] = alg
    return d


rsa1_jwk = jwk(RSAAlgorithm, rsa1, "rsa-1", "RS256")
ec1_jwk = jwk(ECAlgorithm, ec1, "ec-1", "ES256")
ed1_jwk = jwk(OKPAlgorithm, ed1, "ed-1")  # no "alg": the key type decides
rsa2_jwk = jwk(RSAAlgorithm, rsa2, "rsa-2", "RS256")
jwks = {"keys": [rsa1_jwk, ec1_jwk, ed1_jwk]}
# The rotation: rsa-2 arrives, ec-1 leaves.
jwks_rotated = {"keys": [rsa1_jwk, rsa2_jwk, ed1_jwk]}


def claims(**over):
    c = {
        "sub": "alice",
        "iss": issuer,
        "aud": audience,
        "iat": now,
        "exp": now + 600,
        "scope": "upload read openid",
        "bulkwire.max_bytes": 1048576,
        "bulkwire.content_types": ["image/*", "application/pdf"],
        "bulkwire.quota_bytes": 5000000000,
    }
    c.update({k.replace("__", "."): v for k, v in over.items()})
    return {k: v for k, v in c.items() if v is not None}


def token(key, alg, kid, **over):
    headers = {"kid": kid} if kid else None
    return jwt.encode(claims(**over), key, algorithm=alg, headers=headers)


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def b64json(obj):
    return b64(json.dumps(obj, separators=(",", ":")).encode())


# HS256 keyed with the RSA public key as PEM text, kid naming that RSA key: a verifier that
# takes its key from the kid and its algorithm from the token would accept it.
rsa1_pem = rsa1.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)
signing_input = b64json({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}) + "." + b64json(claims())
confusion = signing_input + "." + b64(
    hmac.new(rsa1_pem, signing_input.encode(), hashlib.sha256).digest()
)

rs256 = token(rsa1, "RS256", "rsa-1")
head, _, sig = rs256.split(".")
tampered = head + "." + b64json(claims(sub="mallory")) + "." + sig

tokens = {
    "rs256": rs256,
    "es256": token(ec1, "ES256", "ec-1", sub="bob", scope="delete admin"),
    "eddsa": token(
        ed1,
        "EdDSA",
        "ed-1",
        sub="dave",
        scope="read",
        bulkwire__max_bytes=None,
        bulkwire__content_types=None,
        bulkwire__quota_bytes=None,
    ),
    "hs256": token(secret, "HS256", None, sub="carol", scope="upload"),
    "expired": token(rsa1, "RS256", "rsa-1", exp=now - 3600),
    "expired_within_leeway": token(rsa1, "RS256", "rsa-1", exp=now - 5),
    "not_yet_valid": token(rsa1, "RS256", "rsa-1", nbf=now + 3600),
    "nbf_within_leeway": token(rsa1, "RS256", "rsa-1", nbf=now + 10),
    "wrong_audience": token(rsa1, "RS256", "rsa-1", aud="someone-else"),
    "wrong_issuer": token(ec1, "ES256", "ec-1", iss="https://evil.example"),
    "no_exp": token(rsa1, "RS256", "rsa-1", exp=None),
    "no_sub": token(ed1, "EdDSA", "ed-1", sub=None),
    "bad_max_bytes": token(rsa1, "RS256", "rsa-1", bulkwire__max_bytes="1 MiB"),
    "alg_none": jwt.encode(claims(), None, algorithm="none", headers={"kid": "rsa-1"}),
    "hs256_rsa_pem": confusion,
    "tampered": tampered,
    "wrong_key": token(rsa2, "RS256", "rsa-1"),
    "kid_of_other_type": token(rsa1, "RS256", "ec-1"),
    "unknown_kid": token(stranger, "RS256", "stranger"),
    "rotated": token(rsa2, "RS256", "rsa-2"),
}
unknown = [token(ec1, "ES256", str(uuid.uuid4())) for _ in range(unknown_count)]

print(
    json.dumps(
        {
            "ok": True,
            "now": now,
            "jwks": jwks,
            "jwks_rotated": jwks_rotated,
            "tokens": tokens,
            "unknown": unknown,
        }
    )
)
