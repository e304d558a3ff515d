package dev.lakecore.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;

/**
 * JSON-lines driver: one command object per stdin line, one answer object per stdout line
 * ({@code {"ok": true, ...}} or {@code {"ok": false, "error": ..., "trace": ...}}). An error in
 * one command never ends the process; {@code {"op": "exit"}} or the end of stdin does.
 *
 * <p>stdout carries the protocol only: {@code System.out} is pointed at stderr before anything
 * else runs, and slf4j-simple logs to stderr at WARN (set {@code PAIMON_ORACLE_LOG=info|debug}
 * for more).
 */
public final class Main {

    private Main() {}

    /**
     * Logging to stderr (slf4j-simple at WARN, or {@code PAIMON_ORACLE_LOG}), {@code System.out}
     * pointed at stderr, and the real stdout returned: the channel for the process's answers.
     */
    static PrintStream protocolChannel() {
        String level = System.getenv().getOrDefault("PAIMON_ORACLE_LOG", "warn");
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level);
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        // a local warehouse needs no Hadoop configuration: do not warn about its absence
        System.setProperty(
                "org.slf4j.simpleLogger.log.org.apache.paimon.utils.HadoopUtils", "error");
        PrintStream protocol =
                new PrintStream(
                        new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        return protocol;
    }

    public static void main(String[] args) throws Exception {
        PrintStream protocol = protocolChannel();

        ObjectMapper mapper = new ObjectMapper();
        Oracle oracle = new Oracle(mapper);
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode answer;
            boolean exit = false;
            try {
                JsonNode cmd = mapper.readTree(line);
                String op = cmd.path("op").asText("");
                exit = op.equals("exit");
                answer = oracle.run(op, cmd);
                answer.put("ok", true);
            } catch (Throwable t) {
                answer = mapper.createObjectNode();
                answer.put("ok", false);
                answer.put("error", t.getClass().getName() + ": " + t.getMessage());
                Throwable root = t;
                while (root.getCause() != null && root.getCause() != root) {
                    root = root.getCause();
                }
                if (root != t) {
                    answer.put("root_cause", root.getClass().getName() + ": " + root.getMessage());
                }
                StringWriter sw = new StringWriter();
                t.printStackTrace(new PrintWriter(sw));
                answer.put("trace", sw.toString());
            }
            protocol.println(mapper.writeValueAsString(answer));
            protocol.flush();
            if (exit) {
                break;
            }
        }
        oracle.close();
        protocol.flush();
        System.exit(0);
    }
}
