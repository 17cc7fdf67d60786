// SPDX-License-Identifier: Apache-2.0
// Writes signatures.json: RocketMQ ACL signatures computed with Java's own
// javax.crypto HmacSHA1 and java.util.Base64, the primitives RocketMQ's
// AclSigner uses, over the content RocketMQ's broker signs: the request's
// extFields sorted by key (a TreeMap, String order), Signature and
// _UNIQUE_KEY_QUERY left out, values concatenated in UTF-8, then the body.
// Run: javac SignVectors.java && java SignVectors > signatures.json
import java.nio.charset.StandardCharsets;
import java.util.*;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class SignVectors {
    static String sign(String secret, Map<String, String> ext, byte[] body) throws Exception {
        TreeMap<String, String> m = new TreeMap<>();
        for (Map.Entry<String, String> e : ext.entrySet())
            if (!e.getKey().equals("Signature") && !e.getKey().equals("_UNIQUE_KEY_QUERY"))
                m.put(e.getKey(), e.getValue());
        StringBuilder sb = new StringBuilder();
        for (String v : m.values())
            sb.append(v);
        byte[] head = sb.toString().getBytes(StandardCharsets.UTF_8);
        byte[] all = new byte[head.length + (body == null ? 0 : body.length)];
        System.arraycopy(head, 0, all, 0, head.length);
        if (body != null)
            System.arraycopy(body, 0, all, head.length, body.length);
        Mac mac = Mac.getInstance("HmacSHA1");
        mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
        return Base64.getEncoder().encodeToString(mac.doFinal(all));
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b)
            sb.append(String.format("%02x", x));
        return sb.toString();
    }

    static String q(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] a) throws Exception {
        List<Object[]> cases = new ArrayList<>();
        Map<String, String> e1 = new LinkedHashMap<>();
        e1.put("AccessKey", "RocketMQ");
        e1.put("OnsChannel", "ALIYUN");
        cases.add(new Object[] {"12345678", e1, new byte[0]});
        Map<String, String> e2 = new LinkedHashMap<>();
        e2.put("a", "pg");
        e2.put("b", "TopicA");
        e2.put("c", "TBW102");
        e2.put("d", "4");
        e2.put("e", "1");
        e2.put("f", "0");
        e2.put("g", "1733270400000");
        e2.put("h", "0");
        e2.put("i", "KEYS\u0001k1\u0002UNIQ_KEY\u0001AC1400\u0002");
        e2.put("j", "0");
        e2.put("k", "false");
        e2.put("m", "false");
        e2.put("AccessKey", "RocketMQ");
        e2.put("OnsChannel", "ALIYUN");
        e2.put("Signature", "ignored");
        cases.add(new Object[] {"12345678", e2, "hello".getBytes(StandardCharsets.UTF_8)});
        Map<String, String> e3 = new LinkedHashMap<>();
        e3.put("consumerGroup", "\u6d88\u8d39\u7ec4");
        e3.put("topic", "TopicB");
        e3.put("queueId", "3");
        e3.put("AccessKey", "admin-user");
        e3.put("SecurityToken", "tok");
        e3.put("_UNIQUE_KEY_QUERY", "true");
        byte[] big = new byte[300];
        for (int i = 0; i < big.length; i++)
            big[i] = (byte) (i * 7);
        cases.add(new Object[] {"a-secret-key-that-is-longer-than-sixty-four-bytes-so-it-is-hashed-first", e3, big});
        Map<String, String> e4 = new LinkedHashMap<>();
        cases.add(new Object[] {"12345678", e4, new byte[0]});
        System.out.println("[");
        for (int n = 0; n < cases.size(); n++) {
            Object[] c = cases.get(n);
            @SuppressWarnings("unchecked")
            Map<String, String> ext = (Map<String, String>) c[1];
            StringBuilder sb = new StringBuilder();
            for (Map.Entry<String, String> e : ext.entrySet()) {
                if (sb.length() > 0)
                    sb.append(", ");
                sb.append(q(e.getKey())).append(": ").append(q(e.getValue().replace("\u0001", "\\u0001").replace("\u0002", "\\u0002")).replace("\\\\u", "\\u"));
            }
            System.out.println("  {\"secret\": " + q((String) c[0]) + ", \"ext\": {" + sb + "}, \"body_hex\": \""
                + hex((byte[]) c[2]) + "\", \"signature\": \"" + sign((String) c[0], ext, (byte[]) c[2]) + "\"}"
                + (n + 1 < cases.size() ? "," : ""));
        }
        System.out.println("]");
    }
}
