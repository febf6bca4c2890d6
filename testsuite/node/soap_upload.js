// Uploads a file to bulkwire's SOAP endpoint with the npm `soap` package
// (node-soap): the client is built from GET /soap?wsdl and HTTP Basic set
// with BasicAuthSecurity. Mode "mtom" sends the file as an MTOM/XOP
// attachment (forceMTOM with an attachment the data element includes by
// cid, as node-soap documents); mode "inline" sends it as base64 text.
//
// usage: node soap_upload.js WSDL_URL USER PASSWORD FILE {mtom|inline}
// Prints the uploadResponse as JSON, plus what Node's own fetch() got for
// its `url` (the item's capability link) with no credentials:
// "fetched_status" and "fetched_sha256" (hex SHA-256 of the body). On a
// SOAP fault prints {"fault": ..., "status": ...} and exits 3.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const soap = require('soap');

// A plain GET: fetch() sends no Authorization unless told to, and the
// BasicAuthSecurity in main() belongs to the SOAP client only.
async function fetchWithoutCredentials(url) {
  const res = await fetch(url, { credentials: 'omit', redirect: 'manual' });
  const body = Buffer.from(await res.arrayBuffer());
  return {
    fetched_status: res.status,
    fetched_sha256: crypto.createHash('sha256').update(body).digest('hex'),
  };
}

async function main() {
  const [wsdl, user, password, file, mode] = process.argv.slice(2);
  const client = await soap.createClientAsync(wsdl);
  client.setSecurity(new soap.BasicAuthSecurity(user, password));
  const body = fs.readFileSync(file);
  const name = path.basename(file);
  let args;
  let options = {};
  if (mode === 'mtom') {
    const cid = 'data-' + Date.now() + '@bulkwire.test';
    args = {
      name,
      data: {
        $xml: '<inc:Include xmlns:inc="http://www.w3.org/2004/08/xop/include" href="cid:' +
          encodeURIComponent(cid) + '"/>',
      },
    };
    options = {
      forceMTOM: true,
      attachments: [{ mimetype: 'application/octet-stream', contentId: cid, name, body }],
    };
  } else {
    args = { name, data: body.toString('base64') };
  }
  let r;
  try {
    [r] = await client.uploadAsync(args, options);
  } catch (e) {
    const fault = e.root && e.root.Envelope && e.root.Envelope.Body && e.root.Envelope.Body.Fault;
    if (fault) {
      console.log(JSON.stringify({ fault, status: e.response && e.response.status }));
      process.exit(3);
    }
    throw e;
  }
  const fetched = await fetchWithoutCredentials(r.url);
  console.log(JSON.stringify({
    id: r.id, url: r.url, size: Number(r.size), sha256: r.sha256, ...fetched,
  }));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
