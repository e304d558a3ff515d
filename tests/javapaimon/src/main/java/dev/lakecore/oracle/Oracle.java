package dev.lakecore.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.CoreOptions;
import org.apache.paimon.Snapshot;
import org.apache.paimon.append.AppendCompactCoordinator;
import org.apache.paimon.append.AppendCompactTask;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.CatalogLock;
import org.apache.paimon.catalog.CatalogLockContext;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.index.HashBucketAssigner;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.jdbc.JdbcCatalog;
import org.apache.paimon.jdbc.JdbcCatalogLockContext;
import org.apache.paimon.jdbc.JdbcCatalogLockFactory;
import org.apache.paimon.manifest.BucketEntry;
import org.apache.paimon.operation.BaseAppendFileStoreWrite;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.options.Options;
import org.apache.paimon.predicate.Predicate;
import org.apache.paimon.predicate.PredicateBuilder;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.schema.SchemaChange;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.InnerTable;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.InnerTableCommit;
import org.apache.paimon.table.sink.InnerTableWrite;
import org.apache.paimon.table.sink.RowPartitionKeyExtractor;
import org.apache.paimon.table.sink.StreamTableCommit;
import org.apache.paimon.table.sink.StreamTableWrite;
import org.apache.paimon.table.sink.StreamWriteBuilder;
import org.apache.paimon.table.sink.TableWrite;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.DeletionFile;
import org.apache.paimon.table.source.InnerTableRead;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.TableRead;
import org.apache.paimon.table.source.snapshot.SnapshotReader;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.SortedMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/** The commands, run with Java Paimon's public API. State: catalogs and open stream writers. */
final class Oracle implements AutoCloseable {

    private final ObjectMapper mapper;
    private final Map<String, Catalog> catalogs = new HashMap<>();
    private final Map<String, StreamWriter> streamWriters = new LinkedHashMap<>();
    private final List<LockHolder> lockHolders = new ArrayList<>();
    private final String defaultStreamUser = "oracle-stream-" + UUID.randomUUID();
    // spill / lookup files of every writer (lookup changelog producer, deletion vectors need one)
    private final IOManager ioManager;

    Oracle(ObjectMapper mapper) throws Exception {
        this.mapper = mapper;
        java.nio.file.Path tmp = java.nio.file.Files.createTempDirectory("paimon-oracle-");
        tmp.toFile().deleteOnExit();
        this.ioManager = IOManager.create(tmp.toString());
    }

    ObjectNode run(String op, JsonNode cmd) throws Exception {
        switch (op) {
            case "ping":
                return ping();
            case "exit":
                return obj();
            case "create":
                return create(cmd);
            case "write":
                return write(cmd);
            case "close":
                return closeWriters(cmd);
            case "compact":
                return compact(cmd);
            case "read":
                return read(cmd);
            case "read_incremental":
                return readIncremental(cmd);
            case "files":
                return files(cmd);
            case "snapshots":
                return snapshots(cmd);
            case "expire_snapshots":
                return expireSnapshots(cmd);
            case "create_tag":
                return createTag(cmd);
            case "delete_tag":
                return deleteTag(cmd);
            case "rollback_to":
                return rollbackTo(cmd);
            case "create_branch":
                return createBranch(cmd);
            case "alter":
                return alter(cmd);
            case "schema":
                return schema(cmd);
            case "lock_commit":
                return lockCommit(cmd);
            case "hold_lock":
                return holdLock(cmd);
            case "wait_locks":
                return waitLocks();
            default:
                throw new IllegalArgumentException("unknown op '" + op + "'");
        }
    }

    // ------------------------------------------------------------------------ basics

    private ObjectNode obj() {
        return mapper.createObjectNode();
    }

    private ObjectNode ping() throws Exception {
        ObjectNode out = obj();
        out.put("paimon_version", paimonVersion());
        out.put("java_version", System.getProperty("java.version"));
        return out;
    }

    static String paimonVersion() throws Exception {
        try (InputStream in =
                Oracle.class.getResourceAsStream(
                        "/META-INF/maven/org.apache.paimon/paimon-bundle/pom.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        }
    }

    private static String text(JsonNode cmd, String field) {
        JsonNode n = cmd.get(field);
        if (n == null || n.isNull()) {
            throw new IllegalArgumentException("missing field '" + field + "'");
        }
        return n.asText();
    }

    private static Map<String, String> stringMap(JsonNode n) {
        Map<String, String> out = new LinkedHashMap<>();
        if (n != null && n.isObject()) {
            n.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
        }
        return out;
    }

    private static List<String> stringList(JsonNode n) {
        List<String> out = new ArrayList<>();
        if (n != null && n.isArray()) {
            n.forEach(e -> out.add(e.asText()));
        }
        return out;
    }

    private Catalog catalog(String warehouse) {
        return catalogs.computeIfAbsent(
                warehouse,
                w -> {
                    Options options = new Options();
                    options.set("warehouse", w);
                    // other writers (lakecore) change the tables under us: never cache
                    options.set("cache-enabled", "false");
                    return CatalogFactory.createCatalog(CatalogContext.create(options));
                });
    }

    private static Identifier identifier(JsonNode cmd) {
        return Identifier.fromString(text(cmd, "table"));
    }

    private Table table(JsonNode cmd) throws Exception {
        return table(cmd, stringMap(cmd.get("options")));
    }

    private Table table(JsonNode cmd, Map<String, String> dynamicOptions) throws Exception {
        Table t = catalog(text(cmd, "warehouse")).getTable(identifier(cmd));
        return dynamicOptions.isEmpty() ? t : t.copy(dynamicOptions);
    }

    private static Long latestId(Table t) {
        return t.latestSnapshot().map(Snapshot::id).orElse(null);
    }

    private static void putId(ObjectNode out, String field, Long id) {
        if (id == null) {
            out.putNull(field);
        } else {
            out.put(field, id);
        }
    }

    // ------------------------------------------------------------------------ create / schema

    private ObjectNode create(JsonNode cmd) throws Exception {
        Identifier id = identifier(cmd);
        Catalog catalog = catalog(text(cmd, "warehouse"));
        Schema.Builder b = Schema.newBuilder();
        for (JsonNode f : cmd.path("fields")) {
            DataType type = TypeParser.parse(text(f, "type"));
            if (f.hasNonNull("description")) {
                b.column(text(f, "name"), type, f.get("description").asText());
            } else {
                b.column(text(f, "name"), type);
            }
        }
        List<String> pk = stringList(cmd.get("primary_keys"));
        if (!pk.isEmpty()) {
            b.primaryKey(pk);
        }
        b.partitionKeys(stringList(cmd.get("partition_keys")));
        b.options(stringMap(cmd.get("options")));
        catalog.createDatabase(id.getDatabaseName(), true);
        catalog.createTable(id, b.build(), cmd.path("ignore_if_exists").asBoolean(false));
        return schema(cmd);
    }

    private ObjectNode schema(JsonNode cmd) throws Exception {
        FileStoreTable t = (FileStoreTable) table(cmd, Collections.emptyMap());
        ObjectNode out = obj();
        out.put("schema_id", t.schema().id());
        ArrayNode fields = out.putArray("fields");
        for (DataField f : t.rowType().getFields()) {
            ObjectNode o = fields.addObject();
            o.put("id", f.id());
            o.put("name", f.name());
            o.put("type", f.type().asSQLString());
        }
        out.set("primary_keys", mapper.valueToTree(t.primaryKeys()));
        out.set("partition_keys", mapper.valueToTree(t.partitionKeys()));
        out.set("options", mapper.valueToTree(t.schema().options()));
        out.put("bucket_mode", t.bucketMode().name());
        return out;
    }

    private ObjectNode alter(JsonNode cmd) throws Exception {
        List<SchemaChange> changes = new ArrayList<>();
        for (JsonNode c : cmd.path("changes")) {
            if (c.has("add_column")) {
                JsonNode a = c.get("add_column");
                String name = text(a, "name");
                DataType type = TypeParser.parse(text(a, "type"));
                String comment = a.hasNonNull("comment") ? a.get("comment").asText() : null;
                SchemaChange.Move move = null;
                if (a.hasNonNull("after")) {
                    move = SchemaChange.Move.after(name, a.get("after").asText());
                } else if (a.path("first").asBoolean(false)) {
                    move = SchemaChange.Move.first(name);
                }
                changes.add(SchemaChange.addColumn(name, type, comment, move));
            } else if (c.has("rename_column")) {
                JsonNode r = c.get("rename_column");
                changes.add(SchemaChange.renameColumn(text(r, "from"), text(r, "to")));
            } else if (c.has("drop_column")) {
                changes.add(SchemaChange.dropColumn(c.get("drop_column").asText()));
            } else if (c.has("update_column_type")) {
                JsonNode u = c.get("update_column_type");
                changes.add(
                        SchemaChange.updateColumnType(
                                text(u, "name"), TypeParser.parse(text(u, "type"))));
            } else if (c.has("set_option")) {
                JsonNode s = c.get("set_option");
                changes.add(SchemaChange.setOption(text(s, "key"), text(s, "value")));
            } else if (c.has("remove_option")) {
                changes.add(SchemaChange.removeOption(c.get("remove_option").asText()));
            } else {
                throw new IllegalArgumentException("unknown schema change " + c);
            }
        }
        closeWritersOf(text(cmd, "warehouse"), text(cmd, "table"));
        catalog(text(cmd, "warehouse")).alterTable(identifier(cmd), changes, false);
        return schema(cmd);
    }

    // ------------------------------------------------------------------------ write

    private List<GenericRow> rows(JsonNode cmd, RowType rowType) {
        JsonNode rows = cmd.path("rows");
        JsonNode kinds = cmd.get("row_kinds");
        if (kinds != null && !kinds.isNull() && kinds.size() != rows.size()) {
            throw new IllegalArgumentException(
                    "row_kinds has " + kinds.size() + " entries for " + rows.size() + " rows");
        }
        List<GenericRow> out = new ArrayList<>(rows.size());
        for (int i = 0; i < rows.size(); i++) {
            RowKind kind =
                    kinds == null || kinds.isNull()
                            ? RowKind.INSERT
                            : RowKind.fromShortString(kinds.get(i).asText());
            out.add(Values.toRow(rows.get(i), rowType, kind));
        }
        return out;
    }

    private static Map<String, String> overwrite(JsonNode cmd) {
        JsonNode o = cmd.get("overwrite");
        return o == null || o.isNull() ? null : stringMap(o);
    }

    private ObjectNode write(JsonNode cmd) throws Exception {
        ObjectNode out = obj();
        if (cmd.path("stream").asBoolean(false)) {
            if (overwrite(cmd) != null) {
                throw new IllegalArgumentException("overwrite needs stream=false");
            }
            String user =
                    cmd.hasNonNull("commit_user")
                            ? cmd.get("commit_user").asText()
                            : defaultStreamUser;
            String key = writerKey(text(cmd, "warehouse"), text(cmd, "table"), user);
            StreamWriter w = streamWriters.get(key);
            if (w == null) {
                w = new StreamWriter(table(cmd), user).withIOManager(ioManager);
                streamWriters.put(key, w);
            }
            try {
                for (GenericRow row : rows(cmd, w.table.rowType())) {
                    w.router.write(w.write, row);
                }
            } catch (Exception e) {
                // do not let half a batch ride along with the next commit
                streamWriters.remove(key);
                w.close();
                throw e;
            }
            long ident =
                    cmd.hasNonNull("commit_identifier")
                            ? cmd.get("commit_identifier").asLong()
                            : w.nextIdentifier;
            w.nextIdentifier = Math.max(w.nextIdentifier, ident + 1);
            // as Flink's sink: wait for compaction when a lookup (changelog / DV / first-row)
            // needs it (CoreOptions.prepareCommitWaitCompaction), unless told otherwise
            boolean wait =
                    cmd.hasNonNull("wait_compaction")
                            ? cmd.get("wait_compaction").asBoolean()
                            : CoreOptions.fromMap(w.table.options()).prepareCommitWaitCompaction();
            w.router.prepareCommit(ident);
            List<CommitMessage> messages = w.write.prepareCommit(wait, ident);
            Map<Long, List<CommitMessage>> byId = new HashMap<>();
            byId.put(ident, messages);
            out.put("committed", w.commit.filterAndCommit(byId));
            out.put("commit_identifier", ident);
            out.put("commit_user", user);
            putId(out, "snapshot_id", latestId(w.table));
            return out;
        }

        Table t = table(cmd);
        Map<String, String> overwrite = overwrite(cmd);
        List<GenericRow> rows = rows(cmd, t.rowType());
        if (cmd.hasNonNull("commit_user")) {
            // BatchWriteBuilder always makes up its commit user; this is what it does, with ours
            String user = cmd.get("commit_user").asText();
            InnerTable it = (InnerTable) t;
            try (InnerTableWrite w = it.newWrite(user).withIgnorePreviousFiles(overwrite != null);
                    InnerTableCommit c = it.newCommit(user).withOverwrite(overwrite)) {
                c.ignoreEmptyCommit(true);
                w.withIOManager(ioManager);
                RowRouter router = new RowRouter(t, user);
                for (GenericRow row : rows) {
                    router.write(w, row);
                }
                c.commit(w.prepareCommit());
            }
        } else {
            BatchWriteBuilder wb = t.newBatchWriteBuilder();
            if (overwrite != null) {
                wb.withOverwrite(overwrite);
            }
            try (BatchTableWrite w = wb.newWrite();
                    BatchTableCommit c = wb.newCommit()) {
                w.withIOManager(ioManager);
                RowRouter router = new RowRouter(t, "oracle-batch-" + UUID.randomUUID());
                for (GenericRow row : rows) {
                    router.write(w, row);
                }
                c.commit(w.prepareCommit());
            }
        }
        putId(out, "snapshot_id", latestId(t));
        return out;
    }

    /**
     * Routes rows to a TableWrite. A dynamic-bucket table (bucket = -1 with a primary key) has no
     * bucket function: like Spark's writer at parallelism 1, a HashBucketAssigner (the table's
     * hash index, dynamic-bucket.target-row-num, dynamic-bucket.max-buckets) picks each key's
     * bucket and the row goes to write(row, bucket).
     */
    private static final class RowRouter {
        private final HashBucketAssigner assigner;
        private final RowPartitionKeyExtractor extractor;

        RowRouter(Table table, String commitUser) {
            FileStoreTable ft = (FileStoreTable) table;
            if (ft.bucketMode() == BucketMode.HASH_DYNAMIC) {
                CoreOptions o = ft.coreOptions();
                assigner =
                        new HashBucketAssigner(
                                ft.snapshotManager(),
                                commitUser,
                                ft.store().newIndexFileHandler(),
                                1,
                                1,
                                0,
                                o.dynamicBucketTargetRowNum(),
                                o.dynamicBucketMaxBuckets());
                extractor = new RowPartitionKeyExtractor(ft.schema());
            } else {
                assigner = null;
                extractor = null;
            }
        }

        void write(TableWrite w, GenericRow row) throws Exception {
            if (assigner == null) {
                w.write(row);
            } else {
                int bucket =
                        assigner.assign(
                                extractor.partition(row),
                                extractor.trimmedPrimaryKey(row).hashCode());
                w.write(row, bucket);
            }
        }

        void prepareCommit(long identifier) {
            if (assigner != null) {
                assigner.prepareCommit(identifier);
            }
        }
    }

    private static String writerKey(String warehouse, String table, String user) {
        return warehouse + "\u0000" + table + "\u0000" + user;
    }

    private static final class StreamWriter implements AutoCloseable {
        final Table table;
        final StreamTableWrite write;
        final StreamTableCommit commit;
        final RowRouter router;
        long nextIdentifier = 1;

        StreamWriter(Table table, String user) {
            this.table = table;
            this.router = new RowRouter(table, user);
            StreamWriteBuilder b = table.newStreamWriteBuilder().withCommitUser(user);
            this.write = b.newWrite();
            this.commit = b.newCommit();
        }

        StreamWriter withIOManager(IOManager io) {
            write.withIOManager(io);
            return this;
        }

        @Override
        public void close() throws Exception {
            try {
                write.close();
            } finally {
                commit.close();
            }
        }
    }

    private int closeWritersOf(String warehouse, String table) throws Exception {
        String prefix = warehouse + "\u0000" + table + "\u0000";
        int n = 0;
        Iterator<Map.Entry<String, StreamWriter>> it = streamWriters.entrySet().iterator();
        while (it.hasNext()) {
            Map.Entry<String, StreamWriter> e = it.next();
            if (e.getKey().startsWith(prefix)) {
                it.remove();
                e.getValue().close();
                n++;
            }
        }
        return n;
    }

    private ObjectNode closeWriters(JsonNode cmd) throws Exception {
        ObjectNode out = obj();
        out.put("closed", closeWritersOf(text(cmd, "warehouse"), text(cmd, "table")));
        return out;
    }

    // ------------------------------------------------------------------------ compact

    private ObjectNode compact(JsonNode cmd) throws Exception {
        Map<String, String> dyn = new HashMap<>(stringMap(cmd.get("options")));
        // a write-only table defers compaction to a dedicated job: this is that job
        dyn.put("write-only", "false");
        FileStoreTable t = (FileStoreTable) table(cmd, dyn);
        boolean full = cmd.path("full").asBoolean(true);
        Long before = latestId(t);
        ObjectNode out = obj();
        ArrayNode compacted = out.putArray("compacted");
        List<CommitMessage> messages = new ArrayList<>();
        BatchWriteBuilder wb = t.newBatchWriteBuilder();
        RowType partitionType = t.schema().logicalPartitionType();
        if (t.bucketMode() == BucketMode.BUCKET_UNAWARE) {
            // unaware-bucket append table: Paimon's append compaction coordinator picks the small
            // files, as the Spark/Flink compact procedures do ('full' has no meaning here)
            List<AppendCompactTask> tasks;
            try {
                tasks = new AppendCompactCoordinator(t, false).run();
            } catch (RuntimeException e) {
                if (e.getClass().getSimpleName().equals("EndOfScanException")) {
                    tasks = Collections.emptyList();
                } else {
                    throw e;
                }
            }
            String user = "oracle-compact-" + UUID.randomUUID();
            BaseAppendFileStoreWrite write = (BaseAppendFileStoreWrite) t.store().newWrite(user);
            write.withIOManager(ioManager);
            try {
                for (AppendCompactTask task : tasks) {
                    messages.add(task.doCompact(t, write));
                    ObjectNode o = compacted.addObject();
                    o.set("partition", Values.fromRow(task.partition(), partitionType));
                    o.put("bucket", 0);
                    o.put("files", task.compactBefore().size());
                }
            } finally {
                write.close();
            }
        } else {
            SnapshotReader reader = t.newSnapshotReader();
            List<BucketEntry> entries = new ArrayList<>();
            for (BucketEntry e : reader.bucketEntries()) {
                if (e.fileCount() > 0) {
                    entries.add(e);
                }
            }
            try (BatchTableWrite w = wb.newWrite()) {
                w.withIOManager(ioManager);
                for (BucketEntry e : entries) {
                    w.compact(e.partition(), e.bucket(), full);
                    ObjectNode o = compacted.addObject();
                    o.set("partition", Values.fromRow(e.partition(), partitionType));
                    o.put("bucket", e.bucket());
                    o.put("files", e.fileCount());
                }
                messages.addAll(w.prepareCommit());
            }
        }
        try (BatchTableCommit c = wb.newCommit()) {
            c.commit(messages);
        }
        Long after = latestId(t);
        putId(out, "snapshot_id", after);
        out.put("new_snapshot", after != null && !after.equals(before));
        return out;
    }

    // ------------------------------------------------------------------------ read

    private Predicate predicate(JsonNode f, RowType rowType) {
        PredicateBuilder pb = new PredicateBuilder(rowType);
        Iterator<Map.Entry<String, JsonNode>> it = f.fields();
        if (!it.hasNext()) {
            throw new IllegalArgumentException("empty filter");
        }
        Map.Entry<String, JsonNode> e = it.next();
        String kind = e.getKey();
        JsonNode arg = e.getValue();
        switch (kind) {
            case "and":
            case "or":
                {
                    List<Predicate> ps = new ArrayList<>();
                    arg.forEach(p -> ps.add(predicate(p, rowType)));
                    return kind.equals("and") ? PredicateBuilder.and(ps) : PredicateBuilder.or(ps);
                }
            case "is_null":
            case "is_not_null":
                {
                    int idx = fieldIndex(rowType, arg.asText());
                    return kind.equals("is_null") ? pb.isNull(idx) : pb.isNotNull(idx);
                }
            case "in":
                {
                    int idx = fieldIndex(rowType, arg.get(0).asText());
                    DataType type = rowType.getTypeAt(idx);
                    List<Object> literals = new ArrayList<>();
                    arg.get(1).forEach(v -> literals.add(Values.toInternal(v, type)));
                    return pb.in(idx, literals);
                }
            default:
                {
                    int idx = fieldIndex(rowType, arg.get(0).asText());
                    Object v = Values.toInternal(arg.get(1), rowType.getTypeAt(idx));
                    switch (kind) {
                        case "equal":
                            return pb.equal(idx, v);
                        case "not_equal":
                            return pb.notEqual(idx, v);
                        case "less_than":
                            return pb.lessThan(idx, v);
                        case "less_or_equal":
                            return pb.lessOrEqual(idx, v);
                        case "greater_than":
                            return pb.greaterThan(idx, v);
                        case "greater_or_equal":
                            return pb.greaterOrEqual(idx, v);
                        default:
                            throw new IllegalArgumentException("unknown filter " + kind);
                    }
                }
        }
    }

    private static int fieldIndex(RowType rowType, String name) {
        int idx = rowType.getFieldIndex(name);
        if (idx < 0) {
            throw new IllegalArgumentException(
                    "no field '" + name + "' in " + rowType.getFieldNames());
        }
        return idx;
    }

    private ObjectNode readTable(Table t, JsonNode cmd) throws Exception {
        RowType rowType = t.rowType();
        ReadBuilder rb = t.newReadBuilder();
        RowType readType = rowType;
        JsonNode projection = cmd.get("projection");
        if (projection != null && !projection.isNull()) {
            List<String> names = stringList(projection);
            int[] idx = new int[names.size()];
            List<DataField> fields = new ArrayList<>();
            for (int i = 0; i < idx.length; i++) {
                idx[i] = fieldIndex(rowType, names.get(i));
                fields.add(rowType.getFields().get(idx[i]));
            }
            rb.withProjection(idx);
            readType = new RowType(fields);
        }
        JsonNode filter = cmd.get("filter");
        boolean filtered = filter != null && !filter.isNull();
        if (filtered) {
            rb.withFilter(predicate(filter, rowType));
        }
        List<Split> splits = rb.newScan().plan().splits();
        TableRead read = rb.newRead();
        if (filtered) {
            read.executeFilter();
        }
        if (cmd.path("keep_delete").asBoolean(false)) {
            // what the audit_log system table does: keep -D rows (e.g. in 'diff' mode)
            ((InnerTableRead) read).forceKeepDelete();
        }
        List<String[]> rows = new ArrayList<>();
        RowType rt = readType;
        try (RecordReader<InternalRow> reader = read.createReader(splits)) {
            reader.forEachRemaining(
                    row -> {
                        try {
                            rows.add(
                                    new String[] {
                                        mapper.writeValueAsString(Values.fromRow(row, rt)),
                                        row.getRowKind().shortString()
                                    });
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    });
        }
        rows.sort((a, b) -> a[0].equals(b[0]) ? a[1].compareTo(b[1]) : a[0].compareTo(b[0]));
        ObjectNode out = obj();
        out.set("fields", mapper.valueToTree(readType.getFieldNames()));
        ArrayNode types = out.putArray("types");
        readType.getFieldTypes().forEach(x -> types.add(x.asSQLString()));
        ArrayNode outRows = out.putArray("rows");
        ArrayNode kinds = out.putArray("row_kinds");
        for (String[] r : rows) {
            outRows.add(mapper.readTree(r[0]));
            kinds.add(r[1]);
        }
        out.put("splits", splits.size());
        return out;
    }

    private ObjectNode read(JsonNode cmd) throws Exception {
        Map<String, String> dyn = new HashMap<>(stringMap(cmd.get("options")));
        if (cmd.hasNonNull("snapshot_id")) {
            dyn.put("scan.snapshot-id", cmd.get("snapshot_id").asText());
        }
        if (cmd.hasNonNull("tag")) {
            dyn.put("scan.tag-name", cmd.get("tag").asText());
        }
        return readTable(table(cmd, dyn), cmd);
    }

    private ObjectNode readIncremental(JsonNode cmd) throws Exception {
        Map<String, String> dyn = new HashMap<>(stringMap(cmd.get("options")));
        dyn.put("incremental-between", text(cmd, "start") + "," + text(cmd, "end"));
        dyn.put("incremental-between-scan-mode", cmd.path("mode").asText("auto"));
        return readTable(table(cmd, dyn), cmd);
    }

    private ObjectNode files(JsonNode cmd) throws Exception {
        FileStoreTable t = (FileStoreTable) table(cmd);
        SnapshotReader reader = t.newSnapshotReader();
        if (cmd.hasNonNull("snapshot_id")) {
            reader.withSnapshot(cmd.get("snapshot_id").asLong());
        }
        RowType partitionType = t.schema().logicalPartitionType();
        ObjectNode out = obj();
        ArrayNode files = out.putArray("files");
        for (DataSplit split : reader.read().dataSplits()) {
            List<DataFileMeta> metas = split.dataFiles();
            List<DeletionFile> dvs = split.deletionFiles().orElse(null);
            for (int i = 0; i < metas.size(); i++) {
                DataFileMeta m = metas.get(i);
                ObjectNode o = files.addObject();
                o.set("partition", Values.fromRow(split.partition(), partitionType));
                o.put("bucket", split.bucket());
                o.put("file", m.fileName());
                o.put("level", m.level());
                o.put("row_count", m.rowCount());
                o.put("min_sequence_number", m.minSequenceNumber());
                o.put("max_sequence_number", m.maxSequenceNumber());
                m.deleteRowCount().ifPresent(n -> o.put("delete_row_count", n));
                DeletionFile dv = dvs == null ? null : dvs.get(i);
                if (dv != null) {
                    o.put("deletion_vector", dv.path());
                    if (dv.cardinality() != null) {
                        o.put("deleted_rows", dv.cardinality());
                    }
                }
            }
        }
        return out;
    }

    // ------------------------------------------------------------------------ snapshots, tags

    private ObjectNode snapshots(JsonNode cmd) throws Exception {
        FileStoreTable t = (FileStoreTable) table(cmd, Collections.emptyMap());
        ObjectNode out = obj();
        ArrayNode list = out.putArray("snapshots");
        Iterator<Snapshot> it = t.snapshotManager().snapshots();
        while (it.hasNext()) {
            Snapshot s = it.next();
            ObjectNode o = list.addObject();
            o.put("id", s.id());
            o.put("kind", s.commitKind().name());
            o.put("commit_user", s.commitUser());
            o.put("commit_identifier", s.commitIdentifier());
            o.put("schema_id", s.schemaId());
            o.put("time_millis", s.timeMillis());
            o.put("total_record_count", s.totalRecordCount());
            o.put("delta_record_count", s.deltaRecordCount());
            putId(o, "changelog_record_count", s.changelogRecordCount());
            if (s.indexManifest() == null) {
                o.putNull("index_manifest");
            } else {
                o.put("index_manifest", s.indexManifest());
            }
        }
        TreeSet<String> names = new TreeSet<>();
        ObjectNode tagSnapshots = out.putObject("tag_snapshots");
        SortedMap<Snapshot, List<String>> tags = t.tagManager().tags();
        for (Map.Entry<Snapshot, List<String>> e : tags.entrySet()) {
            for (String n : e.getValue()) {
                names.add(n);
                tagSnapshots.put(n, e.getKey().id());
            }
        }
        out.set("tags", mapper.valueToTree(new ArrayList<>(names)));
        putId(out, "latest", latestId(t));
        return out;
    }

    private ObjectNode expireSnapshots(JsonNode cmd) throws Exception {
        Table t = table(cmd, Collections.emptyMap());
        ExpireConfig.Builder b = ExpireConfig.builder();
        if (cmd.hasNonNull("retain_max")) {
            b.snapshotRetainMax(cmd.get("retain_max").asInt());
        }
        if (cmd.hasNonNull("retain_min")) {
            b.snapshotRetainMin(cmd.get("retain_min").asInt());
        }
        if (cmd.hasNonNull("older_than_ms")) {
            b.snapshotTimeRetain(Duration.ofMillis(cmd.get("older_than_ms").asLong()));
        }
        if (cmd.hasNonNull("max_deletes")) {
            b.snapshotMaxDeletes(cmd.get("max_deletes").asInt());
        }
        ObjectNode out = obj();
        out.put("expired", t.newExpireSnapshots().config(b.build()).expire());
        return out;
    }

    private ObjectNode createTag(JsonNode cmd) throws Exception {
        Table t = table(cmd, Collections.emptyMap());
        if (cmd.hasNonNull("snapshot_id")) {
            t.createTag(text(cmd, "name"), cmd.get("snapshot_id").asLong());
        } else {
            t.createTag(text(cmd, "name"));
        }
        return obj();
    }

    private ObjectNode deleteTag(JsonNode cmd) throws Exception {
        table(cmd, Collections.emptyMap()).deleteTag(text(cmd, "name"));
        return obj();
    }

    private ObjectNode rollbackTo(JsonNode cmd) throws Exception {
        Table t = table(cmd, Collections.emptyMap());
        closeWritersOf(text(cmd, "warehouse"), text(cmd, "table"));
        if (cmd.hasNonNull("tag")) {
            t.rollbackTo(cmd.get("tag").asText());
        } else {
            t.rollbackTo(cmd.get("snapshot_id").asLong());
        }
        ObjectNode out = obj();
        putId(out, "snapshot_id", latestId(t));
        return out;
    }

    /**
     * Table.createBranch: from a tag (its snapshot, schema and tag are copied into
     * branch/branch-NAME) or, without one, an empty branch with the latest schema. Read and write
     * a branch as the table "db.t$branch_NAME".
     */
    private ObjectNode createBranch(JsonNode cmd) throws Exception {
        Table t = table(cmd, Collections.emptyMap());
        String name = text(cmd, "name");
        if (cmd.hasNonNull("tag")) {
            t.createBranch(name, cmd.get("tag").asText());
        } else {
            t.createBranch(name);
        }
        return obj();
    }

    // ------------------------------------------------------------------------ JDBC lock

    /**
     * A JDBC catalog (metastore=jdbc) over the same warehouse. Only a JdbcCatalog hands its
     * tables a lock that works: the commit goes through RenamingSnapshotCommit, which runs
     * "snapshot-N absent? write it, update LATEST" inside JdbcCatalogLock.runWithLock.
     */
    private Catalog jdbcCatalog(JsonNode cmd) {
        JsonNode c = cmd.path("catalog");
        Options options = new Options();
        String metastore = c.path("metastore").asText("jdbc");
        options.set("metastore", metastore);
        options.set("cache-enabled", "false");
        options.set("lock.enabled", "true");
        String warehouse =
                c.hasNonNull("warehouse") ? c.get("warehouse").asText() : text(cmd, "warehouse");
        options.set("warehouse", warehouse);
        String uri = text(c, "uri");
        if (metastore.equals("jdbc")) {
            options.set("uri", uri);
        } else {
            // a filesystem catalog asked for the JDBC lock (lock.type=jdbc)
            options.set("uri", uri);
            options.set("lock.type", "jdbc");
        }
        if (c.hasNonNull("user")) {
            options.set("jdbc.user", c.get("user").asText());
        }
        if (c.hasNonNull("password")) {
            options.set("jdbc.password", c.get("password").asText());
        }
        if (uri.startsWith("jdbc:sqlite:") && c.path("sqlite_wal").asBoolean(true)) {
            // JdbcCatalog leaves DatabaseMetaData.getTables result sets open when its tables
            // already exist (initializeCatalogTablesIfNeed, createDistributedLockTable): in
            // SQLite's rollback-journal mode those open reads hold SHARED locks on the catalog's
            // pooled connections, and the lock's INSERT (another pool) fails with SQLITE_BUSY.
            // In WAL mode (what lakecore's SQLite lock database uses) readers block no writer.
            options.set("jdbc.journal_mode", "WAL");
        }
        c.fields()
                .forEachRemaining(
                        e -> {
                            String k = e.getKey();
                            if (!List.of(
                                            "uri",
                                            "user",
                                            "password",
                                            "warehouse",
                                            "metastore",
                                            "sqlite_wal")
                                    .contains(k)) {
                                options.set(k, e.getValue().asText());
                            }
                        });
        return CatalogFactory.createCatalog(CatalogContext.create(options));
    }

    private ObjectNode lockCommit(JsonNode cmd) throws Exception {
        ObjectNode out = obj();
        Identifier id = identifier(cmd);
        try (Catalog catalog = jdbcCatalog(cmd)) {
            out.put("catalog", catalog.getClass().getSimpleName());
            boolean registered = false;
            Table t;
            try {
                t = catalog.getTable(id);
            } catch (Catalog.TableNotExistException e) {
                // the JDBC catalog keeps its own registry (paimon_tables); a table another
                // (filesystem) catalog created is not in it until repairTable registers it
                catalog.repairTable(id);
                registered = true;
                t = catalog.getTable(id);
            }
            out.put("registered", registered);
            Map<String, String> dyn = stringMap(cmd.get("options"));
            if (!dyn.isEmpty()) {
                t = t.copy(dyn);
            }
            Map<String, String> overwrite = overwrite(cmd);
            // "batches": one commit per batch of rows, each under the lock (a writer that
            // commits M times while others commit to the same table); else one commit of "rows"
            List<JsonNode> batches = new ArrayList<>();
            if (cmd.hasNonNull("batches")) {
                cmd.get("batches").forEach(batches::add);
            } else {
                batches.add(cmd);
            }
            long started = System.nanoTime();
            long totalMs = 0;
            try {
                for (JsonNode batch : batches) {
                    JsonNode spec = batch.isArray() ? obj().set("rows", batch) : batch;
                    // a builder per commit: each has a commit user of its own
                    BatchWriteBuilder wb = t.newBatchWriteBuilder();
                    if (overwrite != null) {
                        wb.withOverwrite(overwrite);
                    }
                    try (BatchTableWrite w = wb.newWrite();
                            BatchTableCommit c = wb.newCommit()) {
                        w.withIOManager(ioManager);
                        RowRouter router = new RowRouter(t, "oracle-lock-" + UUID.randomUUID());
                        for (GenericRow row : rows(spec, t.rowType())) {
                            router.write(w, row);
                        }
                        List<CommitMessage> messages = w.prepareCommit();
                        started = System.nanoTime();
                        c.commit(messages);
                        totalMs += (System.nanoTime() - started) / 1_000_000L;
                    }
                }
            } finally {
                // every getTable of a JdbcCatalog makes a JdbcCatalogLockContext with a pool of
                // its own that nothing closes: close it, or each command leaks connections
                CatalogLockContext ctx = ((FileStoreTable) t).catalogEnvironment().lockContext();
                if (ctx instanceof JdbcCatalogLockContext) {
                    ((JdbcCatalogLockContext) ctx).connections().close();
                }
            }
            out.put("commit_ms", (System.nanoTime() - started) / 1_000_000L);
            out.put("commits", batches.size());
            out.put("total_commit_ms", totalMs);
            putId(out, "snapshot_id", latestId(t));
        }
        return out;
    }

    private static final class LockHolder {
        final Thread thread;
        final AtomicReference<Throwable> error = new AtomicReference<>();
        final CountDownLatch acquired = new CountDownLatch(1);
        volatile long waitedMs;
        volatile long heldMs;

        LockHolder(Runnable body) {
            this.thread = new Thread(body, "oracle-hold-lock");
            this.thread.setDaemon(true);
        }
    }

    private ObjectNode holdLock(JsonNode cmd) throws Exception {
        Identifier id = identifier(cmd);
        long millis = cmd.path("millis").asLong(1000);
        boolean background = cmd.path("background").asBoolean(false);
        Catalog catalog = jdbcCatalog(cmd);
        if (!(catalog instanceof JdbcCatalog)) {
            catalog.close();
            throw new IllegalArgumentException(
                    "hold_lock needs a JDBC catalog, got " + catalog.getClass().getName());
        }
        JdbcCatalog jdbc = (JdbcCatalog) catalog;
        // "catalog" (default): JdbcCatalog.runWithLock, the catalog's own connection pool (what
        // Java's createTable / alterTable lock with); "table": the lock a table commit takes,
        // JdbcCatalogLockFactory over the table's JdbcCatalogLockContext (a pool of its own)
        String via = cmd.path("lock").asText("catalog");
        final CatalogLock tableLock;
        final JdbcCatalogLockContext tableLockContext;
        if (via.equals("table")) {
            Table t;
            try {
                t = jdbc.getTable(id);
            } catch (Catalog.TableNotExistException e) {
                jdbc.repairTable(id);
                t = jdbc.getTable(id);
            }
            tableLockContext =
                    (JdbcCatalogLockContext)
                            ((FileStoreTable) t).catalogEnvironment().lockContext();
            tableLock = new JdbcCatalogLockFactory().createLock(tableLockContext);
        } else if (via.equals("catalog")) {
            tableLock = null;
            tableLockContext = null;
        } else {
            jdbc.close();
            throw new IllegalArgumentException("lock must be 'catalog' or 'table', got " + via);
        }
        final LockHolder[] self = new LockHolder[1];
        LockHolder h =
                new LockHolder(
                        () -> {
                            LockHolder me = self[0];
                            long start = System.nanoTime();
                            java.util.concurrent.Callable<Object> body =
                                    () -> {
                                        me.waitedMs = (System.nanoTime() - start) / 1_000_000L;
                                        me.acquired.countDown();
                                        long t0 = System.nanoTime();
                                        Thread.sleep(millis);
                                        me.heldMs = (System.nanoTime() - t0) / 1_000_000L;
                                        return null;
                                    };
                            try {
                                if (tableLock != null) {
                                    tableLock.runWithLock(
                                            id.getDatabaseName(), id.getObjectName(), body);
                                } else {
                                    jdbc.runWithLock(id, body);
                                }
                            } catch (Throwable t) {
                                me.error.set(t);
                            } finally {
                                me.acquired.countDown();
                                try {
                                    if (tableLockContext != null) {
                                        tableLockContext.connections().close();
                                    }
                                    jdbc.close();
                                } catch (Exception ignored) {
                                    // closing the pool
                                }
                            }
                        });
        self[0] = h;
        h.thread.start();
        ObjectNode out = obj();
        out.put("lock_id", jdbc.getCatalogKey() + "." + id.getDatabaseName() + "."
                + id.getObjectName());
        if (background) {
            h.acquired.await();
            rethrow(h);
            lockHolders.add(h);
            out.put("waited_ms", h.waitedMs);
            out.put("background", true);
            return out;
        }
        h.thread.join();
        rethrow(h);
        out.put("waited_ms", h.waitedMs);
        out.put("held_ms", h.heldMs);
        return out;
    }

    private static void rethrow(LockHolder h) throws Exception {
        Throwable t = h.error.get();
        if (t instanceof Exception) {
            throw (Exception) t;
        } else if (t != null) {
            throw new RuntimeException(t);
        }
    }

    private ObjectNode waitLocks() throws Exception {
        ObjectNode out = obj();
        ArrayNode held = out.putArray("held_ms");
        List<LockHolder> holders = new ArrayList<>(lockHolders);
        lockHolders.clear();
        for (LockHolder h : holders) {
            h.thread.join(TimeUnit.MINUTES.toMillis(10));
            rethrow(h);
            held.add(h.heldMs);
        }
        return out;
    }

    @Override
    public void close() throws Exception {
        for (StreamWriter w : streamWriters.values()) {
            try {
                w.close();
            } catch (Exception ignored) {
                // shutting down
            }
        }
        streamWriters.clear();
        for (LockHolder h : lockHolders) {
            h.thread.join(TimeUnit.MINUTES.toMillis(1));
        }
        for (Catalog c : catalogs.values()) {
            c.close();
        }
        ioManager.close();
    }
}
