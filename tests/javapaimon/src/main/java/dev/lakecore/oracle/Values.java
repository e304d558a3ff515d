package dev.lakecore.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericArray;
import org.apache.paimon.data.GenericMap;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DecimalType;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.MultisetType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The driver's value encoding, both directions: JSON null; integers and FLOAT/DOUBLE as numbers;
 * BOOLEAN; strings; DECIMAL as a string; DATE "2024-01-31"; TIME "12:00:00.123"; TIMESTAMP and
 * TIMESTAMP_LTZ (its UTC wall clock) "2024-01-31T12:00:00.123456"; BYTES as base64; ARRAY and
 * MULTISET (elements repeated by count) as lists; MAP as a list of [key, value]; ROW as a list
 * of its fields.
 */
final class Values {

    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    private static final DateTimeFormatter TS =
            DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSS");
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("HH:mm:ss.SSS");

    private Values() {}

    // ---------------------------------------------------------------- JSON -> Paimon internal

    static GenericRow toRow(JsonNode values, RowType type, RowKind kind) {
        List<DataType> types = type.getFieldTypes();
        if (!values.isArray() || values.size() != types.size()) {
            throw new IllegalArgumentException(
                    "row "
                            + values
                            + " has "
                            + values.size()
                            + " values, the table has "
                            + types.size()
                            + " fields "
                            + type.getFieldNames());
        }
        GenericRow row = new GenericRow(kind, types.size());
        for (int i = 0; i < types.size(); i++) {
            row.setField(i, toInternal(values.get(i), types.get(i)));
        }
        return row;
    }

    static Object toInternal(JsonNode v, DataType type) {
        if (v == null || v.isNull()) {
            return null;
        }
        switch (type.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                return BinaryString.fromString(v.asText());
            case BOOLEAN:
                return v.asBoolean();
            case BINARY:
            case VARBINARY:
                return Base64.getDecoder().decode(v.asText());
            case DECIMAL:
                {
                    DecimalType dt = (DecimalType) type;
                    Decimal d =
                            Decimal.fromBigDecimal(
                                    new BigDecimal(v.asText()), dt.getPrecision(), dt.getScale());
                    if (d == null) {
                        throw new IllegalArgumentException(v + " does not fit " + type);
                    }
                    return d;
                }
            case TINYINT:
                return (byte) v.asInt();
            case SMALLINT:
                return (short) v.asInt();
            case INTEGER:
                return v.asInt();
            case BIGINT:
                return v.asLong();
            case FLOAT:
                return (float) v.asDouble();
            case DOUBLE:
                return v.asDouble();
            case DATE:
                return (int) LocalDate.parse(v.asText()).toEpochDay();
            case TIME_WITHOUT_TIME_ZONE:
                return (int) (LocalTime.parse(v.asText()).toNanoOfDay() / 1_000_000L);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return Timestamp.fromLocalDateTime(LocalDateTime.parse(v.asText()));
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return Timestamp.fromInstant(
                        LocalDateTime.parse(v.asText()).toInstant(ZoneOffset.UTC));
            case ARRAY:
                {
                    DataType et = ((ArrayType) type).getElementType();
                    Object[] out = new Object[v.size()];
                    for (int i = 0; i < v.size(); i++) {
                        out[i] = toInternal(v.get(i), et);
                    }
                    return new GenericArray(out);
                }
            case MULTISET:
                {
                    DataType et = ((MultisetType) type).getElementType();
                    Map<Object, Object> counts = new LinkedHashMap<>();
                    for (JsonNode e : v) {
                        counts.merge(toInternal(e, et), 1, (a, b) -> (Integer) a + (Integer) b);
                    }
                    return new GenericMap(counts);
                }
            case MAP:
                {
                    MapType mt = (MapType) type;
                    Map<Object, Object> map = new LinkedHashMap<>();
                    for (JsonNode pair : v) {
                        if (!pair.isArray() || pair.size() != 2) {
                            throw new IllegalArgumentException(
                                    "a MAP is a list of [key, value] pairs, got " + pair);
                        }
                        map.put(
                                toInternal(pair.get(0), mt.getKeyType()),
                                toInternal(pair.get(1), mt.getValueType()));
                    }
                    return new GenericMap(map);
                }
            case ROW:
                return toRow(v, (RowType) type, RowKind.INSERT);
            default:
                throw new UnsupportedOperationException("no JSON encoding for " + type);
        }
    }

    // ---------------------------------------------------------------- Paimon internal -> JSON

    static ArrayNode fromRow(InternalRow row, RowType type) {
        ArrayNode out = F.arrayNode();
        List<DataType> types = type.getFieldTypes();
        for (int i = 0; i < types.size(); i++) {
            out.add(fromInternal(InternalRow.createFieldGetter(types.get(i), i).getFieldOrNull(row),
                    types.get(i)));
        }
        return out;
    }

    static JsonNode fromInternal(Object o, DataType type) {
        if (o == null) {
            return NullNode.getInstance();
        }
        switch (type.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                return F.textNode(o.toString());
            case BOOLEAN:
                return F.booleanNode((Boolean) o);
            case BINARY:
            case VARBINARY:
                return F.textNode(Base64.getEncoder().encodeToString((byte[]) o));
            case DECIMAL:
                return F.textNode(((Decimal) o).toBigDecimal().toPlainString());
            case TINYINT:
                return F.numberNode((Byte) o);
            case SMALLINT:
                return F.numberNode((Short) o);
            case INTEGER:
                return F.numberNode((Integer) o);
            case BIGINT:
                return F.numberNode((Long) o);
            case FLOAT:
                return F.numberNode((Float) o);
            case DOUBLE:
                return F.numberNode((Double) o);
            case DATE:
                return F.textNode(LocalDate.ofEpochDay((Integer) o).toString());
            case TIME_WITHOUT_TIME_ZONE:
                return F.textNode(
                        LocalTime.ofNanoOfDay((Integer) o * 1_000_000L).format(TIME));
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return F.textNode(((Timestamp) o).toLocalDateTime().format(TS));
            case ARRAY:
                {
                    DataType et = ((ArrayType) type).getElementType();
                    InternalArray arr = (InternalArray) o;
                    InternalArray.ElementGetter g = InternalArray.createElementGetter(et);
                    ArrayNode out = F.arrayNode();
                    for (int i = 0; i < arr.size(); i++) {
                        out.add(fromInternal(g.getElementOrNull(arr, i), et));
                    }
                    return out;
                }
            case MULTISET:
                {
                    DataType et = ((MultisetType) type).getElementType();
                    InternalMap map = (InternalMap) o;
                    InternalArray.ElementGetter kg = InternalArray.createElementGetter(et);
                    ArrayNode out = F.arrayNode();
                    for (int i = 0; i < map.size(); i++) {
                        JsonNode e = fromInternal(kg.getElementOrNull(map.keyArray(), i), et);
                        int n = map.valueArray().getInt(i);
                        for (int j = 0; j < n; j++) {
                            out.add(e);
                        }
                    }
                    return out;
                }
            case MAP:
                {
                    MapType mt = (MapType) type;
                    InternalMap map = (InternalMap) o;
                    InternalArray.ElementGetter kg =
                            InternalArray.createElementGetter(mt.getKeyType());
                    InternalArray.ElementGetter vg =
                            InternalArray.createElementGetter(mt.getValueType());
                    ArrayNode out = F.arrayNode();
                    for (int i = 0; i < map.size(); i++) {
                        ArrayNode pair = F.arrayNode();
                        pair.add(fromInternal(kg.getElementOrNull(map.keyArray(), i),
                                mt.getKeyType()));
                        pair.add(fromInternal(vg.getElementOrNull(map.valueArray(), i),
                                mt.getValueType()));
                        out.add(pair);
                    }
                    return out;
                }
            case ROW:
                return fromRow((InternalRow) o, (RowType) type);
            default:
                return F.textNode(String.valueOf(o));
        }
    }
}
