package bulkwire.cxf;

import jakarta.activation.DataHandler;
import jakarta.activation.FileDataSource;
import jakarta.xml.ws.BindingProvider;
import jakarta.xml.ws.Service;
import jakarta.xml.ws.soap.MTOMFeature;
import jakarta.xml.ws.soap.SOAPFaultException;
import java.io.File;
import java.io.InputStream;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import javax.xml.namespace.QName;

/**
 * Uploads a file to bulkwire's SOAP endpoint with the Apache CXF JAX-WS
 * client, MTOM enabled (threshold 0: data always goes as an XOP
 * attachment), HTTP Basic through BindingProvider.
 *
 * <p>usage: CxfUpload WSDL_URL USER PASSWORD FILE {11|12} [faults-at-any-status].
 * Prints the uploadResponse as JSON, plus what java.net.http.HttpClient got
 * for its {@code url} (the item's capability link) with no credentials:
 * {@code fetched_status} and {@code fetched_sha256} (hex SHA-256 of the
 * body). On a SOAP fault prints {"fault": code, "message": its fault string}
 * and exits 3. CXF reads a fault only from a 500 answer (WS-I Basic Profile
 * R1126); any other error status it raises as an HTTPException without
 * reading the body: then prints {"http_status": code, "http_message": …}
 * and exits 4; any other WebServiceException: {"error": its causes}, exit
 * 5. With {@code faults-at-any-status} the client is set as CXF
 * users set it to read faults at any status
 * ({@code org.apache.cxf.transport.no_io_exceptions}).
 */
public final class CxfUpload {
    public static void main(String[] args) throws Exception {
        String wsdl = args[0];
        File file = new File(args[3]);
        String port = args[4].equals("12") ? "MediaSoap12" : "MediaSoap11";
        Service svc = Service.create(new URL(wsdl), new QName(Upload.NS, "MediaService"));
        Media media = svc.getPort(new QName(Upload.NS, port), Media.class, new MTOMFeature(true, 0));
        BindingProvider bp = (BindingProvider) media;
        bp.getRequestContext().put(BindingProvider.USERNAME_PROPERTY, args[1]);
        bp.getRequestContext().put(BindingProvider.PASSWORD_PROPERTY, args[2]);
        if (args.length > 5 && args[5].equals("faults-at-any-status")) {
            bp.getRequestContext().put("org.apache.cxf.transport.no_io_exceptions", true);
        }
        Upload req = new Upload();
        req.name = file.getName();
        req.contentType = "application/x-cxf";
        req.data = new DataHandler(new FileDataSource(file));
        try {
            UploadResponse r = media.upload(req);
            Fetched f = fetchWithoutCredentials(r.url);
            System.out.printf("{\"id\":\"%s\",\"url\":\"%s\",\"size\":%d,\"sha256\":\"%s\","
                    + "\"fetched_status\":%d,\"fetched_sha256\":\"%s\"}%n",
                    r.id, r.url, r.size, r.sha256, f.status, f.sha256);
        } catch (SOAPFaultException e) {
            String code = e.getFault().getFaultCodeAsQName().getLocalPart();
            String message = e.getFault().getFaultString();
            System.out.printf("{\"fault\":\"%s\",\"message\":\"%s\"}%n", json(code), json(message));
            System.exit(3);
        } catch (jakarta.xml.ws.WebServiceException e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof org.apache.cxf.transport.http.HTTPException h) {
                    System.out.printf("{\"http_status\":%d,\"http_message\":\"%s\"}%n",
                            h.getResponseCode(), json(String.valueOf(h.getResponseMessage())));
                    System.exit(4);
                }
            }
            StringBuilder chain = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) {
                chain.append(t.getClass().getName()).append(": ").append(t.getMessage()).append(" <- ");
            }
            System.out.printf("{\"error\":\"%s\"}%n", json(chain.toString()));
            System.exit(5);
        }
    }

    /** A string's JSON escapes (the quotes go around it). */
    private static String json(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    private record Fetched(int status, String sha256) {}

    /**
     * GETs a link with a fresh HttpClient: no Authenticator, no cookie
     * handler, no proxy, no redirects, so no credentials can go with it (the
     * Basic auth above is CXF's, on the SOAP port only).
     */
    private static Fetched fetchWithoutCredentials(String url) throws Exception {
        HttpClient http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .proxy(HttpClient.Builder.NO_PROXY)
                .followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(Duration.ofSeconds(30))
                .build();
        HttpRequest get = HttpRequest.newBuilder(URI.create(url))
                .timeout(Duration.ofSeconds(60))
                .GET()
                .build();
        HttpResponse<InputStream> res = http.send(get, HttpResponse.BodyHandlers.ofInputStream());
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        try (InputStream in = res.body()) {
            byte[] buf = new byte[64 * 1024];
            for (int n; (n = in.read(buf)) > 0; ) {
                md.update(buf, 0, n);
            }
        }
        return new Fetched(res.statusCode(), HexFormat.of().formatHex(md.digest()));
    }
}
