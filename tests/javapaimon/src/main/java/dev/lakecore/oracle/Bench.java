package dev.lakecore.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.CoreOptions;
import org.apache.paimon.Snapshot;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.format.FileFormat;
import org.apache.paimon.format.FormatReaderContext;
import org.apache.paimon.format.FormatReaderFactory;
import org.apache.paimon.fs.FileIO;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.index.HashBucketAssigner;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.manifest.BucketEntry;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.RowPartitionKeyExtractor;
import org.apache.paimon.table.sink.TableWriteImpl;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.DeletionFile;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.RowType;

import java.io.File;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.stream.Stream;

/**
 * Benchmark main: Java Paimon's own write / upsert / read / compaction on primary-key tables,
 * driven by bench/java_paimon.py. {@code java -cp paimon-oracle.jar dev.lakecore.oracle.Bench
 * spec.json}; the spec and the result are described in tests/javapaimon/README.md ("Bench").
 *
 * <p>The input rows are loaded from Parquet (Paimon's own Parquet reader) into GenericRows before
 * anything is timed and every write reuses them. Each phase is timed on its own; rounds run all
 * workloads in turn on fresh tables, so round 0 carries the JIT's warm-up. stdout carries one
 * JSON object (the result, or {@code {"error", "trace"}} with exit code 1); everything else goes
 * to stderr.
 */
public final class Bench {

    /** The fixed schema of the benchmark rows (and of the Parquet inputs). */
    static final RowType ROW_TYPE =
            RowType.builder()
                    .field("id", DataTypes.BIGINT().notNull())
                    .field("i32", DataTypes.INT())
                    .field("i64", DataTypes.BIGINT())
                    .field("f64", DataTypes.DOUBLE())
                    .field("s", DataTypes.STRING())
                    .field("ts", DataTypes.TIMESTAMP(6))
                    .build();

    private static final String DATABASE = "db";

    private final ObjectMapper mapper = new ObjectMapper();
    private final JsonNode spec;
    private final Catalog catalog;
    private final IOManager ioManager;
    private final java.nio.file.Path ioDir;

    private Bench(JsonNode spec) throws Exception {
        this.spec = spec;
        Options options = new Options();
        options.set("warehouse", text(spec, "warehouse"));
        // a read or write job is a fresh process: nothing cached from the previous phase
        options.set("cache-enabled", "false");
        this.catalog = CatalogFactory.createCatalog(CatalogContext.create(options));
        this.catalog.createDatabase(DATABASE, true);
        // spill files of the write buffers, lookup files of compaction (deletion vectors)
        this.ioDir = Files.createTempDirectory("paimon-bench-io-");
        this.ioManager = IOManager.create(ioDir.toString());
    }

    public static void main(String[] args) {
        double uptimeAtMain = ManagementFactory.getRuntimeMXBean().getUptime() / 1000.0;
        PrintStream result = Main.protocolChannel();

        ObjectMapper mapper = new ObjectMapper();
        int code = 0;
        ObjectNode out;
        try {
            if (args.length != 1) {
                throw new IllegalArgumentException("usage: Bench spec.json");
            }
            Bench bench = new Bench(mapper.readTree(new File(args[0])));
            try {
                out = bench.run(uptimeAtMain);
            } finally {
                bench.close();
            }
        } catch (Throwable t) {
            out = mapper.createObjectNode();
            out.put("error", t.getClass().getName() + ": " + t.getMessage());
            StringWriter sw = new StringWriter();
            t.printStackTrace(new PrintWriter(sw));
            out.put("trace", sw.toString());
            t.printStackTrace();
            code = 1;
        }
        try {
            result.println(mapper.writeValueAsString(out));
        } catch (Exception e) {
            result.println("{\"error\": \"cannot write the result\"}");
            code = 1;
        }
        result.flush();
        System.exit(code);
    }

    // ------------------------------------------------------------------------ the run

    private ObjectNode run(double uptimeAtMain) throws Exception {
        ObjectNode out = mapper.createObjectNode();
        out.put("jvm_uptime_at_main_s", uptimeAtMain);
        out.put("paimon_version", Oracle.paimonVersion());
        out.put("java_version", System.getProperty("java.version"));
        out.put("available_processors", Runtime.getRuntime().availableProcessors());
        out.put("max_heap_bytes", Runtime.getRuntime().maxMemory());
        out.put("compact_threads", spec.path("compact_threads").asInt(1));

        long t0 = System.nanoTime();
        List<List<GenericRow>> commits = new ArrayList<>();
        long loaded = 0;
        for (JsonNode p : spec.path("commits")) {
            commits.add(loadParquet(p.asText()));
            loaded += commits.get(commits.size() - 1).size();
        }
        List<GenericRow> upsert = loadParquet(text(spec, "upsert"));
        loaded += upsert.size();
        out.put("load_s", seconds(t0));
        out.put("rows_loaded", loaded);
        out.put("upsert_rows", upsert.size());
        log("loaded %,d rows in %.2f s", loaded, seconds(t0));

        int rounds = spec.path("rounds").asInt(1);
        ArrayNode results = out.putArray("results");
        ArrayNode roundWall = out.putArray("round_wall_s");
        for (int round = 0; round < rounds; round++) {
            long r0 = System.nanoTime();
            for (JsonNode w : spec.path("workloads")) {
                // a clean heap between workloads (untimed), not in the middle of the next one
                System.gc();
                results.add(runWorkload(w, round, commits, upsert));
            }
            roundWall.add(seconds(r0));
            if (round == 0) {
                out.put("round0_wall_s", seconds(r0));
            }
        }
        return out;
    }

    private ObjectNode runWorkload(
            JsonNode w, int round, List<List<GenericRow>> commits, List<GenericRow> upsert)
            throws Exception {
        String name = text(w, "name");
        Identifier id = Identifier.create(DATABASE, name + "_r" + round);
        Map<String, String> options = new LinkedHashMap<>();
        w.path("options")
                .fields()
                .forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
        Schema.Builder schema = Schema.newBuilder();
        for (DataField f : ROW_TYPE.getFields()) {
            schema.column(f.name(), f.type());
        }
        catalog.createTable(id, schema.primaryKey("id").options(options).build(), false);

        ObjectNode res = mapper.createObjectNode();
        res.put("workload", name);
        res.put("round", round);
        res.put("table", id.getFullName());
        ObjectNode phases = res.putObject("phases");
        ObjectNode checksums = res.putObject("checksums");
        ObjectNode compactions = res.putObject("compactions");
        long w0 = System.nanoTime();
        for (JsonNode p : w.path("phases")) {
            String phase = p.asText();
            String key = phase;
            for (int n = 2; phases.has(key); n++) {
                key = phase + "#" + n;
            }
            long t0 = System.nanoTime();
            switch (phase) {
                case "write":
                    {
                        Table t = catalog.getTable(id);
                        for (List<GenericRow> rows : commits) {
                            writeCommit(t, rows);
                        }
                        break;
                    }
                case "upsert":
                    writeCommit(catalog.getTable(id), upsert);
                    break;
                case "read":
                case "read_compacted":
                    checksums.set(key, read(id).toJson(mapper));
                    break;
                case "compact":
                    compactions.set(key, compact(id, true));
                    break;
                case "compact_minor":
                    compactions.set(key, compact(id, false));
                    break;
                default:
                    throw new IllegalArgumentException("unknown phase '" + phase + "'");
            }
            double s = seconds(t0);
            phases.put(key, s);
            log("round %d %s %s: %.3f s", round, name, key, s);
        }
        res.put("wall_s", seconds(w0));

        FileStoreTable t = (FileStoreTable) catalog.getTable(id);
        long count = 0;
        long bytes = 0;
        long withDv = 0;
        for (DataSplit split : t.newSnapshotReader().read().dataSplits()) {
            List<DeletionFile> dvs = split.deletionFiles().orElse(null);
            List<DataFileMeta> files = split.dataFiles();
            for (int i = 0; i < files.size(); i++) {
                count++;
                bytes += files.get(i).fileSize();
                if (dvs != null && dvs.get(i) != null) {
                    withDv++;
                }
            }
        }
        ObjectNode files = res.putObject("files");
        files.put("count", count);
        files.put("bytes", bytes);
        files.put("with_deletion_vector", withDv);
        res.put("snapshots", t.snapshotManager().snapshotCount());
        res.put("bucket_mode", t.bucketMode().name());
        return res;
    }

    // ------------------------------------------------------------------------ phases

    /** A write's spill directory, and the compaction threads, if not Paimon's default one. */
    private void prepare(BatchTableWrite write, ExecutorService compactThreads) {
        write.withIOManager(ioManager);
        if (compactThreads != null) {
            ((TableWriteImpl<?>) write).withCompactExecutor(compactThreads);
        }
    }

    /** One batch write job: every row of one input file, one commit. */
    private void writeCommit(Table table, List<GenericRow> rows) throws Exception {
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        ExecutorService compactThreads = compactExecutor();
        try (BatchTableWrite write = builder.newWrite();
                BatchTableCommit commit = builder.newCommit()) {
            prepare(write, compactThreads);
            FileStoreTable ft = (FileStoreTable) table;
            if (ft.bucketMode() == BucketMode.HASH_DYNAMIC) {
                // bucket = -1: the table has no bucket function, the writer is told each row's
                // bucket. Like Spark's or Flink's writer at parallelism 1: one HashBucketAssigner
                // (the table's hash index, dynamic-bucket.target-row-num / max-buckets).
                CoreOptions o = ft.coreOptions();
                HashBucketAssigner assigner =
                        new HashBucketAssigner(
                                ft.snapshotManager(),
                                "bench-" + UUID.randomUUID(),
                                ft.store().newIndexFileHandler(),
                                1,
                                1,
                                0,
                                o.dynamicBucketTargetRowNum(),
                                o.dynamicBucketMaxBuckets());
                RowPartitionKeyExtractor keys = new RowPartitionKeyExtractor(ft.schema());
                for (GenericRow row : rows) {
                    int bucket =
                            assigner.assign(
                                    keys.partition(row), keys.trimmedPrimaryKey(row).hashCode());
                    write.write(row, bucket);
                }
            } else {
                for (GenericRow row : rows) {
                    write.write(row);
                }
            }
            commit.commit(write.prepareCommit());
        } finally {
            if (compactThreads != null) {
                compactThreads.shutdownNow();
            }
        }
    }

    /**
     * A dedicated compaction job (write-only = false): every (partition, bucket) holding data
     * files in the latest snapshot, full or Paimon's own picks, one commit.
     */
    private ObjectNode compact(Identifier id, boolean full) throws Exception {
        FileStoreTable t =
                (FileStoreTable) catalog.getTable(id).copy(Map.of("write-only", "false"));
        Long before = t.snapshotManager().latestSnapshotId();
        List<BucketEntry> buckets = new ArrayList<>();
        for (BucketEntry e : t.newSnapshotReader().bucketEntries()) {
            if (e.fileCount() > 0) {
                buckets.add(e);
            }
        }
        BatchWriteBuilder builder = t.newBatchWriteBuilder();
        ExecutorService compactThreads = compactExecutor();
        try (BatchTableWrite write = builder.newWrite();
                BatchTableCommit commit = builder.newCommit()) {
            prepare(write, compactThreads);
            // each call hands the bucket's compaction to the write's compaction executor;
            // prepareCommit (a batch write's waits for compaction) collects them all
            for (BucketEntry e : buckets) {
                write.compact(e.partition(), e.bucket(), full);
            }
            commit.commit(write.prepareCommit());
        } finally {
            if (compactThreads != null) {
                compactThreads.shutdownNow();
            }
        }
        ObjectNode out = mapper.createObjectNode();
        out.put("buckets", buckets.size());
        Snapshot after = t.snapshotManager().latestSnapshot();
        out.put("new_snapshot", after != null && (before == null || after.id() != before));
        return out;
    }

    /** A read job: plan the latest snapshot, read every row, touch every field. */
    private Checksum read(Identifier id) throws Exception {
        Table t = catalog.getTable(id);
        ReadBuilder rb = t.newReadBuilder();
        List<Split> splits = rb.newScan().plan().splits();
        Checksum sum = new Checksum();
        sum.splits = splits.size();
        try (RecordReader<InternalRow> reader = rb.newRead().createReader(splits)) {
            RecordReader.RecordIterator<InternalRow> batch;
            while ((batch = reader.readBatch()) != null) {
                InternalRow row;
                while ((row = batch.next()) != null) {
                    sum.add(row);
                }
                batch.releaseBatch();
            }
        }
        return sum;
    }

    /**
     * What a read saw, comparable with another reader's: long sums wrap around (two's
     * complement, as int64 sums in Arrow); nulls are skipped; {@code s_bytes} sums the UTF-8
     * lengths, {@code sum_ts_us} the timestamps as epoch microseconds. {@code sum_f64} depends on
     * the order of the rows (compare it approximately).
     */
    static final class Checksum {
        long rows;
        long sumId;
        long sumI32;
        long nonNullI32;
        long sumI64;
        long nonNullI64;
        double sumF64;
        long nonNullF64;
        long nonNullS;
        long sBytes;
        long sumTsUs;
        long nonNullTs;
        int splits;

        void add(InternalRow row) {
            rows++;
            sumId += row.getLong(0);
            if (!row.isNullAt(1)) {
                sumI32 += row.getInt(1);
                nonNullI32++;
            }
            if (!row.isNullAt(2)) {
                sumI64 += row.getLong(2);
                nonNullI64++;
            }
            if (!row.isNullAt(3)) {
                sumF64 += row.getDouble(3);
                nonNullF64++;
            }
            if (!row.isNullAt(4)) {
                sBytes += row.getString(4).getSizeInBytes();
                nonNullS++;
            }
            if (!row.isNullAt(5)) {
                sumTsUs += row.getTimestamp(5, 6).toMicros();
                nonNullTs++;
            }
        }

        ObjectNode toJson(ObjectMapper mapper) {
            ObjectNode o = mapper.createObjectNode();
            o.put("rows", rows);
            o.put("sum_id", sumId);
            o.put("sum_i32", sumI32);
            o.put("non_null_i32", nonNullI32);
            o.put("sum_i64", sumI64);
            o.put("non_null_i64", nonNullI64);
            o.put("sum_f64", sumF64);
            o.put("non_null_f64", nonNullF64);
            o.put("non_null_s", nonNullS);
            o.put("s_bytes", sBytes);
            o.put("sum_ts_us", sumTsUs);
            o.put("non_null_ts", nonNullTs);
            o.put("splits", splits);
            return o;
        }
    }

    // ------------------------------------------------------------------------ input

    /** Every row of a Parquet file as GenericRows (copies: the reader reuses its batches). */
    static List<GenericRow> loadParquet(String file) throws Exception {
        FileIO fileIO = LocalFileIO.create();
        Path path = new Path(file);
        FormatReaderFactory factory =
                FileFormat.fromIdentifier("parquet", new Options())
                        .createReaderFactory(ROW_TYPE, ROW_TYPE, null);
        List<GenericRow> rows = new ArrayList<>();
        try (RecordReader<InternalRow> reader =
                factory.createReader(
                        new FormatReaderContext(fileIO, path, fileIO.getFileSize(path)))) {
            reader.forEachRemaining(
                    r -> {
                        if (r.isNullAt(0)) {
                            throw new IllegalArgumentException(file + ": a null id");
                        }
                        GenericRow g = new GenericRow(6);
                        g.setField(0, r.getLong(0));
                        g.setField(1, r.isNullAt(1) ? null : r.getInt(1));
                        g.setField(2, r.isNullAt(2) ? null : r.getLong(2));
                        g.setField(3, r.isNullAt(3) ? null : r.getDouble(3));
                        BinaryString s = r.isNullAt(4) ? null : r.getString(4).copy();
                        g.setField(4, s);
                        g.setField(5, r.isNullAt(5) ? null : r.getTimestamp(5, 6));
                        rows.add(g);
                    });
        }
        return rows;
    }

    // ------------------------------------------------------------------------ helpers

    /**
     * A write's compaction executor: null (Paimon's own, one thread per write, so the buckets
     * of one job compact one after another) unless the spec asks for "compact_threads" > 1.
     */
    private ExecutorService compactExecutor() {
        int threads = spec.path("compact_threads").asInt(1);
        return threads > 1 ? Executors.newFixedThreadPool(threads) : null;
    }

    private static String text(JsonNode n, String field) {
        JsonNode v = n.get(field);
        if (v == null || v.isNull()) {
            throw new IllegalArgumentException("spec: missing field '" + field + "'");
        }
        return v.asText();
    }

    private static double seconds(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e9;
    }

    private static void log(String format, Object... args) {
        System.err.println("[bench] " + String.format(format, args));
    }

    private void close() throws Exception {
        try {
            catalog.close();
            ioManager.close();
        } finally {
            try (Stream<java.nio.file.Path> walk = Files.walk(ioDir)) {
                walk.sorted(Comparator.reverseOrder()).map(java.nio.file.Path::toFile)
                        .forEach(File::delete);
            }
        }
    }
}
