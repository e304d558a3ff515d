package dev.lakecore.oracle;

import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeJsonParser;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.MultisetType;
import org.apache.paimon.types.RowType;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Parses Paimon/Flink SQL type strings ("BIGINT NOT NULL", "DECIMAL(10,2)", "ARRAY<INT>",
 * "MAP<STRING, INT>", "ROW<a INT, b STRING>").
 *
 * <p>Atomic types go to Paimon's own {@link DataTypeJsonParser#parseAtomicTypeSQLString}, which
 * does not understand the composite types; ARRAY, MULTISET, MAP and ROW are split here and their
 * parts parsed recursively. Nested field ids are placeholders: Paimon reassigns them when the
 * schema is created or altered.
 */
final class TypeParser {

    private TypeParser() {}

    static DataType parse(String text) {
        String s = text.trim();
        String upper = s.toUpperCase(Locale.ROOT);
        for (String kw : new String[] {"ARRAY", "MULTISET", "MAP", "ROW"}) {
            if (!upper.startsWith(kw)) {
                continue;
            }
            int open = kw.length();
            while (open < s.length() && Character.isWhitespace(s.charAt(open))) {
                open++;
            }
            if (open >= s.length() || (s.charAt(open) != '<' && s.charAt(open) != '(')) {
                continue;
            }
            int close = matching(s, open);
            String inner = s.substring(open + 1, close);
            boolean nullable = nullability(s.substring(close + 1), text);
            List<String> parts = splitTopLevel(inner);
            switch (kw) {
                case "ARRAY":
                    expect(parts.size() == 1, text);
                    return new ArrayType(nullable, parse(parts.get(0)));
                case "MULTISET":
                    expect(parts.size() == 1, text);
                    return new MultisetType(nullable, parse(parts.get(0)));
                case "MAP":
                    expect(parts.size() == 2, text);
                    return new MapType(nullable, parse(parts.get(0)), parse(parts.get(1)));
                default:
                    List<DataField> fields = new ArrayList<>();
                    int id = 0;
                    for (String part : parts) {
                        fields.add(field(id++, part.trim(), text));
                    }
                    return new RowType(nullable, fields);
            }
        }
        return DataTypeJsonParser.parseAtomicTypeSQLString(s);
    }

    private static DataField field(int id, String part, String whole) {
        String name;
        String rest;
        if (part.startsWith("`")) {
            int end = part.indexOf('`', 1);
            expect(end > 0, whole);
            name = part.substring(1, end);
            rest = part.substring(end + 1);
        } else {
            int end = 0;
            while (end < part.length() && !Character.isWhitespace(part.charAt(end))) {
                end++;
            }
            name = part.substring(0, end);
            rest = part.substring(end);
        }
        rest = rest.trim();
        String description = null;
        // a trailing 'comment' (Flink's ROW<name TYPE 'comment'>)
        if (rest.endsWith("'")) {
            int start = rest.lastIndexOf('\'', rest.length() - 2);
            if (start > 0) {
                description = rest.substring(start + 1, rest.length() - 1);
                rest = rest.substring(0, start).trim();
            }
        }
        expect(!name.isEmpty() && !rest.isEmpty(), whole);
        return new DataField(id, name, parse(rest), description);
    }

    private static boolean nullability(String tail, String whole) {
        String t = tail.trim().replaceAll("\\s+", " ").toUpperCase(Locale.ROOT);
        if (t.isEmpty() || t.equals("NULL")) {
            return true;
        }
        if (t.equals("NOT NULL")) {
            return false;
        }
        throw new IllegalArgumentException("Cannot parse type: " + whole);
    }

    private static int matching(String s, int open) {
        int depth = 0;
        char quote = 0;
        for (int i = open; i < s.length(); i++) {
            char c = s.charAt(i);
            if (quote != 0) {
                if (c == quote) {
                    quote = 0;
                }
            } else if (c == '\'' || c == '`') {
                quote = c;
            } else if (c == '<' || c == '(') {
                depth++;
            } else if (c == '>' || c == ')') {
                depth--;
                if (depth == 0) {
                    return i;
                }
            }
        }
        throw new IllegalArgumentException("Unbalanced brackets in type: " + s);
    }

    private static List<String> splitTopLevel(String s) {
        List<String> parts = new ArrayList<>();
        int depth = 0;
        char quote = 0;
        int start = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (quote != 0) {
                if (c == quote) {
                    quote = 0;
                }
            } else if (c == '\'' || c == '`') {
                quote = c;
            } else if (c == '<' || c == '(') {
                depth++;
            } else if (c == '>' || c == ')') {
                depth--;
            } else if (c == ',' && depth == 0) {
                parts.add(s.substring(start, i));
                start = i + 1;
            }
        }
        String last = s.substring(start);
        if (!last.trim().isEmpty() || !parts.isEmpty()) {
            parts.add(last);
        }
        return parts;
    }

    private static void expect(boolean ok, String whole) {
        if (!ok) {
            throw new IllegalArgumentException("Cannot parse type: " + whole);
        }
    }
}
