"""Uploads a file to bulkwire's SOAP endpoint with zeep, the way a zeep user
would: the client is built from GET /soap?wsdl, the call is
service.upload(name=..., data=bytes) (zeep sends xs:base64Binary inline),
and HTTP Basic goes through a requests.Session.

usage: soap_zeep.py WSDL_URL USER PASSWORD FILE {11|12}
Prints the uploadResponse as JSON, plus what a GET of its `url` (the item's
capability link) got with no credentials, by urllib.request:
"fetched_status" and "fetched_sha256" (hex SHA-256 of the body). On a SOAP
fault prints {"fault": code, "message": ...} and exits 3.
"""

import json
import sys

import requests
import zeep
import zeep.exceptions
import zeep.transports
from link_fetch import fetch_without_credentials


def main():
    wsdl, user, password, path, version = sys.argv[1:6]
    session = requests.Session()
    session.auth = (user, password)
    client = zeep.Client(wsdl, transport=zeep.transports.Transport(session=session))
    if version == "12":
        service = client.bind("MediaService", "MediaSoap12")
    else:
        service = client.service
    with open(path, "rb") as f:
        data = f.read()
    try:
        r = service.upload(name=path.rsplit("/", 1)[-1], contentType="application/x-test", data=data)
    except zeep.exceptions.Fault as e:
        print(json.dumps({"fault": str(e.code), "message": e.message}))
        sys.exit(3)
    out = {"id": r.id, "url": r.url, "size": int(r.size), "sha256": r.sha256}
    out["fetched_status"], out["fetched_sha256"] = fetch_without_credentials(r.url)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
