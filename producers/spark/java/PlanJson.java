/*
 * A plan's JSON, as TreeNode.toJSON() writes it, written straight from the tree.
 *
 * Spark's toJSON() builds the whole document as json4s values first (and for every
 * node of every expression looks up its constructor's parameter names through Scala
 * reflection), then has Jackson render it: on a 300-column plan that is 60-130 ms,
 * most of an action's lineage extraction. This class walks the same tree with the same
 * rules (TreeNode.jsonValue, jsonFields, parseToJson and shouldConvertToJson of Spark
 * 3.5 and 4.0 to 4.3, which are identical), caches the parameter names per class, and appends
 * to one StringBuilder, escaping strings as Jackson does. Nodes that override
 * jsonFields (Literal) are asked for their fields and only those are rendered here.
 *
 * The output is the same string toJSON() returns (tests/producers/spark/test_plan_json.py
 * compares them on real plans for each tested Spark). On anything unexpected it returns
 * toJSON() itself, and counts it (fallbacks()).
 *
 * writeCompact() writes the same document less what the lineage never reads and a wide plan
 * repeats thousands of times (issue 14, item 7: on the 1,000-column plan it halves the JSON):
 * "num-children" of leaves (0), every expression's "metadata" (Spark writes Metadata.empty
 * anyway) and "qualifier", and an ExprId's "product-class" and "jvmId" (an ExprId is {"id":N}).
 * It also writes each distinct AttributeReference once: the document is {"attrs":[...],"tree":[...]}
 * and an attribute in an expression is the number -(i + 1) for attrs[i] (a 1,000-column plan lists
 * every column again in each of its 20 projections: 3.5 MB -> 0.6 MB). Python reads both forms
 * (producers/spark/lineage/plan.py). The compiled class is cached under a hash of this source, so a
 * changed form never meets a stale class.
 *
 * node() reaches a node of the tree by its path in one call, for the look-ups the JSON leaves
 * null (py4j would take two round trips per step: children(), then apply(i)); fileRelations()
 * gives the format and paths of every file input of a plan in one call; readsPersistedView() says whether
 * an action's analyzed plan reads a persisted view (which its optimized plan no longer shows).
 *
 * Shipped as source and compiled with JobEventsListener (producers/spark/jvm_classes.py).
 */
package lineagewire.spark;

import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.sql.catalyst.AliasIdentifier;
import org.apache.spark.sql.catalyst.CatalystIdentifier;
import org.apache.spark.sql.catalyst.ScalaReflection$;
import org.apache.spark.sql.catalyst.catalog.BucketSpec;
import org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTableType;
import org.apache.spark.sql.catalyst.catalog.FunctionResource;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.plans.JoinType;
import org.apache.spark.sql.catalyst.plans.physical.BroadcastMode;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;
import org.apache.spark.sql.catalyst.trees.TreeNode;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.storage.StorageLevel;

import scala.Option;
import scala.Product;
import scala.Tuple2;
import scala.collection.Iterator;
import scala.collection.Seq;

public final class PlanJson {
    private static final char[] HEX = "0123456789ABCDEF".toCharArray();
    /**
     * What toJSON() takes for a sequence (Scala's default Seq): scala.collection.Seq on Scala 2.12 (Spark 3.5),
     * scala.collection.immutable.Seq on 2.13 (Spark 4). Declared types here are scala.collection.Seq, which
     * both are, so one source compiles against either.
     */
    private static final Class<?> SEQ = scala.util.Properties.versionNumberString().startsWith("2.12.")
            ? Seq.class : scala.collection.immutable.Seq.class;
    /** Spark's truncatedString(Seq, start, sep, end, maxFields), whose Seq is SEQ: looked up, as no one
     *  declared type compiles against both. Used only for a sequence of strings. */
    private static final java.lang.reflect.Method TRUNCATED_STRING = truncatedString();

    private static java.lang.reflect.Method truncatedString() {
        try {
            return org.apache.spark.sql.catalyst.util.package$.class.getMethod(
                    "truncatedString", SEQ, String.class, String.class, String.class, int.class);
        } catch (NoSuchMethodException e) {
            throw new IllegalStateException("Spark without catalyst.util.truncatedString", e);
        }
    }

    /** Constructor parameter names per class: Spark looks them up by Scala reflection for every node, every time. */
    private static final ClassValue<String[]> NAMES = new ClassValue<String[]>() {
        @Override
        protected String[] computeValue(Class<?> type) {
            Seq<String> names = ScalaReflection$.MODULE$.getConstructorParameterNames(type);
            String[] out = new String[names.length()];
            Iterator<String> it = names.iterator();
            for (int i = 0; it.hasNext(); i++) {
                out[i] = it.next();
            }
            return out;
        }
    };

    /** Whether a node class writes its own fields (overrides TreeNode.jsonFields, as Literal does). */
    private static final ClassValue<Boolean> OWN_FIELDS = new ClassValue<Boolean>() {
        @Override
        protected Boolean computeValue(Class<?> type) {
            try {
                return type.getMethod("jsonFields").getDeclaringClass() != TreeNode.class;
            } catch (NoSuchMethodException e) {
                return Boolean.FALSE;
            }
        }
    };

    private final AtomicLong written = new AtomicLong();
    private final AtomicLong fallbacks = new AtomicLong();
    private volatile String lastFallback;

    /** The plan's JSON, equal to {@code root.toJSON()}. */
    public String write(TreeNode<?> root) {
        return write(root, false);
    }

    /** The plan's JSON without the fields the lineage does not read (see the top of this file). */
    public String writeCompact(TreeNode<?> root) {
        return write(root, true);
    }

    private String write(TreeNode<?> root, boolean compact) {
        try {
            Writer writer = new Writer(compact);
            String json = compact ? writer.document(root) : writer.tree(root).toString();
            written.incrementAndGet();
            return json;
        } catch (RuntimeException | ReflectiveOperationException | LinkageError e) {
            fallbacks.incrementAndGet();
            lastFallback = e.toString();
            return root.toJSON();
        }
    }

    /**
     * The node at {@code path} under {@code root}: steps separated by '/', each "c:i" (children().apply(i)),
     * "s:i" (subqueries().apply(i)) or "f:name" (the field's getter; an Option is unwrapped, None is null).
     */
    public Object node(Object root, String path) throws ReflectiveOperationException {
        Object at = root;
        for (String step : path.split("/")) {
            if (step.isEmpty()) {
                continue;
            }
            String arg = step.substring(2);
            switch (step.charAt(0)) {
                case 'c': at = ((TreeNode<?>) at).children().apply(Integer.parseInt(arg)); break;
                case 's': at = ((org.apache.spark.sql.catalyst.plans.QueryPlan<?>) at).subqueries()
                        .apply(Integer.parseInt(arg)); break;
                case 'f': at = at.getClass().getMethod(arg).invoke(at); break;
                default: throw new IllegalArgumentException("plan path step " + step + ": expected c:, s: or f:");
            }
            if (at instanceof Option) {
                at = ((Option<?>) at).isDefined() ? ((Option<?>) at).get() : null;
            }
            if (at == null) {
                return null;
            }
        }
        return at;
    }

    /**
     * A HadoopFsRelation in one call, for the lineage of a file read (py4j would take ten round trips):
     * its file format's class simple name, the format's short name ("" without one), then its root
     * paths, one a line. Null for any other relation.
     */
    public String fileRelation(Object relation) {
        if (!(relation instanceof HadoopFsRelation)) {
            return null;
        }
        HadoopFsRelation r = (HadoopFsRelation) relation;
        FileFormat format = r.fileFormat();
        String shortName = "";
        if (format instanceof DataSourceRegister) {
            try {
                shortName = ((DataSourceRegister) format).shortName();
            } catch (RuntimeException | LinkageError e) {
                shortName = "";
            }
        }
        StringBuilder b = new StringBuilder().append(format.getClass().getSimpleName()).append('\n').append(shortName);
        Iterator<?> it = r.location().rootPaths().iterator();
        while (it.hasNext()) {
            b.append('\n').append(it.next());
        }
        return b.toString();
    }

    /**
     * The file relations of many plan nodes in one call (the leaves of a 20-join plan are 21 of them: three
     * round trips each through py4j): for each path in {@code paths} (separated by '\n'), the LogicalRelation
     * there's relation as {@link #fileRelation} writes it, or "" when it is not a HadoopFsRelation (or the
     * path leads nowhere), the records separated by '\u001e'.
     */
    public String fileRelations(Object root, String paths) throws ReflectiveOperationException {
        StringBuilder b = new StringBuilder();
        String[] each = paths.split("\n", -1);
        for (int i = 0; i < each.length; i++) {
            if (i > 0) {
                b.append('\u001e');
            }
            Object node = node(root, each[i]);
            // By name, as the Python side matches it (no compile-time tie to where Spark keeps the class).
            if (node != null && node.getClass().getSimpleName().equals("LogicalRelation")) {
                String facts = fileRelation(node.getClass().getMethod("relation").invoke(node));
                if (facts != null) {
                    b.append(facts);
                }
            }
        }
        return b.toString();
    }

    /**
     * What the RDD of a LogicalRDD / ExternalRDD reads, found through its dependencies in one call (py4j would take
     * several round trips per RDD, and one per file), as openlineage-spark's Rdds / RddDatasetInfoExtractor do.
     * One line per leaf RDD (an RDD without dependencies), its fields separated by '\t':
     * <ul>
     * <li>"scan", class, read schema as JSON, directories (separated by '\u001f'): a FileScanRDD (df.rdd of a file
     *     source): the folder of each file read, less its partition folders ("k=v"), which is the root a direct read
     *     names;</li>
     * <li>"source", class, "", directories: a DataSourceRDD's file partitions (V2 file sources; the columns it reads
     *     are not public on the RDD);</li>
     * <li>"partition", class of a DataSourceRDD input partition that is not a file partition (Kafka, Iceberg, ...);</li>
     * <li>"hadoop", class, "", input paths: a HadoopRDD / NewHadoopRDD (textFile, hadoopFile, ...), from its job
     *     configuration;</li>
     * <li>"leaf", class: any other RDD without dependencies (parallelize, a checkpoint, a connector's own RDD).</li>
     * </ul>
     * Then '\u001e' and the RDD's toDebugString() (the creating method of Hadoop RDDs: lineage/connectors/rdd.py).
     */
    public String rddInputs(Object rdd) throws java.io.IOException, ReflectiveOperationException {
        StringBuilder b = new StringBuilder();
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        java.util.ArrayDeque<org.apache.spark.rdd.RDD<?>> todo = new java.util.ArrayDeque<>();
        todo.push((org.apache.spark.rdd.RDD<?>) rdd);
        while (!todo.isEmpty()) {
            org.apache.spark.rdd.RDD<?> at = todo.pop();
            if (!seen.add(at.id())) {
                continue;
            }
            Iterator<?> deps = at.dependencies().iterator();
            boolean leaf = !deps.hasNext();
            while (deps.hasNext()) {
                todo.push(((org.apache.spark.Dependency<?>) deps.next()).rdd());
            }
            String cls = at.getClass().getName();
            if (at instanceof org.apache.spark.sql.execution.datasources.FileScanRDD) {
                org.apache.spark.sql.execution.datasources.FileScanRDD scan =
                        (org.apache.spark.sql.execution.datasources.FileScanRDD) at;
                java.util.Set<String> dirs = new java.util.LinkedHashSet<>();
                Iterator<?> parts = scan.filePartitions().iterator();
                while (parts.hasNext()) {
                    addFolders(dirs, (org.apache.spark.sql.execution.datasources.FilePartition) parts.next());
                }
                line(b, "scan", cls, scan.readSchema().json(), dirs);
            } else if (at instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceRDD) {
                java.util.Set<String> dirs = new java.util.LinkedHashSet<>();
                for (org.apache.spark.Partition p : at.partitions()) {
                    if (!(p instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceRDDPartition)) {
                        line(b, "partition", p.getClass().getName(), "", java.util.Collections.emptySet());
                        continue;
                    }
                    Iterator<?> inputs = inputPartitions(p);
                    while (inputs.hasNext()) {
                        Object input = inputs.next();
                        if (input instanceof org.apache.spark.sql.execution.datasources.FilePartition) {
                            addFolders(dirs, (org.apache.spark.sql.execution.datasources.FilePartition) input);
                        } else {
                            line(b, "partition", input.getClass().getName(), "", java.util.Collections.emptySet());
                        }
                    }
                }
                if (!dirs.isEmpty()) {
                    line(b, "source", cls, "", dirs);
                }
            } else if (at instanceof org.apache.spark.rdd.HadoopRDD) {
                line(b, "hadoop", cls, "", paths(org.apache.hadoop.mapred.FileInputFormat.getInputPaths(
                        ((org.apache.spark.rdd.HadoopRDD<?, ?>) at).getJobConf())));
            } else if (at instanceof org.apache.spark.rdd.NewHadoopRDD) {
                line(b, "hadoop", cls, "", paths(org.apache.hadoop.mapreduce.lib.input.FileInputFormat.getInputPaths(
                        org.apache.hadoop.mapreduce.Job.getInstance(((org.apache.spark.rdd.NewHadoopRDD<?, ?>) at)
                                .getConf()))));
            } else if (leaf) {
                line(b, "leaf", cls, "", java.util.Collections.emptySet());
            }
        }
        return b.append('\u001e').append(((org.apache.spark.rdd.RDD<?>) rdd).toDebugString()).toString();
    }

    /** The folder of each file of {@code part}, less the partition folders ("k=v") of its partition values. */
    private static void addFolders(java.util.Set<String> dirs, org.apache.spark.sql.execution.datasources.FilePartition part) {
        for (org.apache.spark.sql.execution.datasources.PartitionedFile file : part.files()) {
            org.apache.hadoop.fs.Path dir = file.filePath().toPath().getParent();
            for (int i = file.partitionValues().numFields(); i > 0 && dir != null && dir.getParent() != null
                    && dir.getName().contains("="); i--) {
                dir = dir.getParent();
            }
            if (dir != null) {
                dirs.add(dir.toString());
            }
        }
    }

    private static java.util.Set<String> paths(org.apache.hadoop.fs.Path[] paths) {
        java.util.Set<String> out = new java.util.LinkedHashSet<>();
        for (org.apache.hadoop.fs.Path p : paths) {
            out.add(p.toString());
        }
        return out;
    }

    /**
     * A DataSourceRDDPartition's input partitions: a Seq of them up to Spark 4.0 ({@code inputPartitions()}), an
     * Option of one in newer 4.x ({@code inputPartition()}, 4.3.0).
     */
    private static Iterator<?> inputPartitions(Object partition) throws ReflectiveOperationException {
        java.lang.reflect.Method get;
        try {
            get = partition.getClass().getMethod("inputPartitions");
        } catch (NoSuchMethodException e) {
            get = partition.getClass().getMethod("inputPartition");
        }
        Object parts = get.invoke(partition);
        return parts instanceof Option ? ((Option<?>) parts).iterator() : ((Seq<?>) parts).iterator();
    }

    private static void line(StringBuilder b, String kind, String cls, String schema, java.util.Set<String> paths) {
        if (b.length() > 0) {
            b.append('\n');
        }
        b.append(kind).append('\t').append(cls).append('\t').append(schema).append('\t')
                .append(String.join("\u001f", paths));
    }

    /**
     * Whether the analyzed plan of {@code queryExecution} (a QueryExecution) reads a persisted view: a View node
     * that is not a temporary view's, in the tree, its subqueries or a command's nested plans. The optimizer
     * removes View nodes, so the lineage reads the analyzed plan instead, to name such a read by the view.
     * One call for the whole walk (py4j would take several round trips per node).
     */
    public boolean readsPersistedView(Object queryExecution) {
        try {
            return hasPersistedView(((org.apache.spark.sql.execution.QueryExecution) queryExecution).analyzed());
        } catch (RuntimeException | LinkageError e) {
            return false; // e.g. a plan that did not analyze (onFailure): the optimized plan is all there is
        }
    }

    private static boolean hasPersistedView(TreeNode<?> node) {
        if (node instanceof org.apache.spark.sql.catalyst.plans.logical.View
                && !((org.apache.spark.sql.catalyst.plans.logical.View) node).isTempView()) {
            return true;
        }
        Iterator<?> it = node.children().iterator();
        while (it.hasNext()) {
            if (hasPersistedView((TreeNode<?>) it.next())) {
                return true;
            }
        }
        // Subqueries of a QueryPlan, and plans a command holds outside its children (a CTAS query).
        it = node.innerChildren().iterator();
        while (it.hasNext()) {
            Object inner = it.next();
            if (inner instanceof TreeNode && hasPersistedView((TreeNode<?>) inner)) {
                return true;
            }
        }
        return false;
    }

    /** Plans written by this class. */
    public long written() {
        return written.get();
    }

    /** Plans this class could not write, for which toJSON() answered instead. */
    public long fallbacks() {
        return fallbacks.get();
    }

    /** Why the last fallback happened, or null. */
    public String lastFallback() {
        return lastFallback;
    }

    /** One document: the output and what it has rendered already. */
    private static final class Writer {
        private final StringBuilder out = new StringBuilder(1 << 16);
        private final IdentityHashMap<DataType, String> types = new IdentityHashMap<>();
        private final boolean compact;
        private String emptyMetadata;
        /** Compact form: each distinct AttributeReference, as written, and its index in "attrs". */
        private final HashMap<String, Integer> attributeIndex = new HashMap<>();
        /** The same, by instance: a plan's nodes mostly share their attribute objects, and rendering is the cost. */
        private final IdentityHashMap<TreeNode<?>, Integer> attributeObjects = new IdentityHashMap<>();
        private final StringBuilder attributes = new StringBuilder(1 << 12);

        Writer(boolean compact) {
            this.compact = compact;
        }

        /** The compact document: {"attrs":[distinct attributes],"tree":[the plan's nodes]}. */
        String document(TreeNode<?> root) throws ReflectiveOperationException {
            tree(root);
            return new StringBuilder(out.length() + attributes.length() + 20).append("{\"attrs\":[")
                    .append(attributes).append("],\"tree\":").append(out).append('}').toString();
        }

        /** TreeNode.jsonValue: the nodes of the tree, pre-order, in one array. */
        StringBuilder tree(TreeNode<?> root) throws ReflectiveOperationException {
            out.append('[');
            node(root, true);
            out.append(']');
            return out;
        }

        private void node(TreeNode<?> tn, boolean first) throws ReflectiveOperationException {
            if (!first) {
                out.append(',');
            }
            Seq<?> children = tn.children();
            if (compact && tn.getClass() == AttributeReference.class && children.isEmpty()) {
                attribute(tn);
                return;
            }
            out.append("{\"class\":");
            string(tn.getClass().getName());
            if (!compact || children.length() > 0) {
                out.append(",\"num-children\":").append(children.length());
            }
            if (OWN_FIELDS.get(tn.getClass())) {
                jfields(tn.jsonFields());
            } else {
                fields(tn, children);
            }
            out.append('}');
            Iterator<?> it = children.iterator();
            while (it.hasNext()) {
                node((TreeNode<?>) it.next(), false);
            }
        }

        /**
         * An AttributeReference in the compact form: written once into "attrs", and here as -(its index + 1).
         * A 1,000-column plan repeats each column in every projection and join above it; written in full
         * that was nine tenths of its JSON. Equal text, not the exprId alone, makes two references one: an
         * outer join changes an attribute's nullability and keeps its exprId.
         */
        private void attribute(TreeNode<?> tn) throws ReflectiveOperationException {
            Integer known = attributeObjects.get(tn);
            if (known != null) {
                out.append(-known - 1);
                return;
            }
            int mark = out.length();
            out.append("{\"class\":");
            string(tn.getClass().getName());
            fields(tn, tn.children());
            out.append('}');
            String text = out.substring(mark);
            out.setLength(mark);
            Integer index = attributeIndex.get(text);
            if (index == null) {
                index = attributeIndex.size();
                attributeIndex.put(text, index);
                if (index > 0) {
                    attributes.append(',');
                }
                attributes.append(text);
            }
            attributeObjects.put(tn, index);
            out.append(-index - 1);
        }

        /** TreeNode.jsonFields: children as their index, everything else through parseToJson. */
        private void fields(TreeNode<?> tn, Seq<?> children) throws ReflectiveOperationException {
            String[] names = NAMES.get(tn.getClass());
            Object[] values = elements(tn, tn.otherCopyArgs());
            if (names.length != values.length) {
                throw new IllegalStateException(tn.getClass().getName() + ": " + names.length + " constructor "
                        + "parameters, " + values.length + " values");
            }
            scala.collection.immutable.Set<TreeNode<?>> isChild = tn.containsChild();
            for (int i = 0; i < names.length; i++) {
                Object value = values[i];
                if (compact && (value instanceof Metadata || "qualifier".equals(names[i]))) {
                    continue;
                }
                int mark = out.length();
                out.append(',');
                string(names[i]);
                out.append(':');
                if (value instanceof TreeNode && isChild.contains((TreeNode<?>) value)) {
                    out.append(children.indexOf(value));
                } else if (SEQ.isInstance(value) && allChildren((Seq<?>) value, isChild)) {
                    out.append('[');
                    Iterator<?> it = ((Seq<?>) value).iterator();
                    for (boolean first = true; it.hasNext(); first = false) {
                        if (!first) {
                            out.append(',');
                        }
                        out.append(children.indexOf(it.next()));
                    }
                    out.append(']');
                } else if (!value(value)) {
                    out.setLength(mark);  // json4s leaves out a field whose value is JNothing (None)
                }
            }
        }

        @SuppressWarnings("unchecked")
        private static boolean allChildren(Seq<?> seq, scala.collection.immutable.Set<TreeNode<?>> isChild) {
            Iterator<?> it = seq.iterator();
            while (it.hasNext()) {
                Object v = it.next();
                if (!(v instanceof TreeNode) || !isChild.contains((TreeNode<?>) v)) {
                    return false;
                }
            }
            return true;
        }

        private static Object[] elements(Product p, Seq<?> extra) {
            int arity = p.productArity();
            int more = extra == null ? 0 : extra.length();
            Object[] values = new Object[arity + more];
            for (int i = 0; i < arity; i++) {
                values[i] = p.productElement(i);
            }
            if (more > 0) {
                Iterator<?> it = extra.iterator();
                for (int i = arity; it.hasNext(); i++) {
                    values[i] = it.next();
                }
            }
            return values;
        }

        /** TreeNode.parseToJson; false when the value is JNothing (an empty Option), which writes nothing. */
        private boolean value(Object obj) throws ReflectiveOperationException {
            if (obj == null) {
                out.append("null");
            } else if (obj instanceof Boolean) {
                out.append(((Boolean) obj).booleanValue());
            } else if (obj instanceof Byte || obj instanceof Short || obj instanceof Integer || obj instanceof Long) {
                out.append(((Number) obj).longValue());
            } else if (obj instanceof Float) {
                number(((Float) obj).doubleValue());
            } else if (obj instanceof Double) {
                number((Double) obj);
            } else if (obj instanceof scala.math.BigInt) {
                out.append(((scala.math.BigInt) obj).bigInteger().toString());
            } else if (obj instanceof String) {
                string((String) obj);
            } else if (obj instanceof UUID) {
                string(obj.toString());
            } else if (obj instanceof DataType) {
                out.append(types.computeIfAbsent((DataType) obj, DataType::json));
            } else if (obj instanceof Metadata) {
                // Spark writes Metadata.empty for every Metadata (SPARK-17356: a model's metadata can be huge).
                if (emptyMetadata == null) {
                    emptyMetadata = Metadata.empty().json();
                }
                out.append(emptyMetadata);
            } else if (obj instanceof Class) {
                string(((Class<?>) obj).getName());
            } else if (obj instanceof StorageLevel) {
                StorageLevel s = (StorageLevel) obj;
                out.append("{\"useDisk\":").append(s.useDisk()).append(",\"useMemory\":").append(s.useMemory())
                        .append(",\"useOffHeap\":").append(s.useOffHeap()).append(",\"deserialized\":")
                        .append(s.deserialized()).append(",\"replication\":").append(s.replication()).append('}');
            } else if (obj instanceof TreeNode) {
                tree((TreeNode<?>) obj);
            } else if (obj instanceof Option) {
                Option<?> o = (Option<?>) obj;
                return o.isDefined() && value(o.get());
            } else if (SEQ.isInstance(obj)) {
                seq((Seq<?>) obj);
            } else if (obj instanceof scala.collection.Map) {
                out.append("null");
            } else if (obj.getClass().getName().endsWith("$")) {
                out.append("{\"object\":");
                string(obj.getClass().getName());
                out.append('}');
            } else if (compact && obj instanceof ExprId) {
                out.append("{\"id\":").append(((ExprId) obj).id()).append('}');
            } else if (obj instanceof Product && shouldConvert((Product) obj)) {
                product((Product) obj);
            } else {
                out.append("null");
            }
            return true;
        }

        private void seq(Seq<?> t) throws ReflectiveOperationException {
            if (all(t, Partitioning.class) || all(t, DataType.class) || all(t, Product.class)) {
                out.append('[');
                boolean first = true;
                Iterator<?> it = t.iterator();
                while (it.hasNext()) {
                    int mark = out.length();
                    if (!first) {
                        out.append(',');
                    }
                    if (value(it.next())) {
                        first = false;
                    } else {
                        out.setLength(mark);  // json4s skips JNothing in arrays too
                    }
                }
                out.append(']');
            } else if (t.length() > 0 && t.head() instanceof String) {
                string((String) TRUNCATED_STRING.invoke(org.apache.spark.sql.catalyst.util.package$.MODULE$,
                        t, "[", ", ", "]", SQLConf.get().maxToStringFields()));
            } else {
                out.append("null");
            }
        }

        private static boolean all(Seq<?> t, Class<?> type) {
            Iterator<?> it = t.iterator();
            while (it.hasNext()) {
                if (!type.isInstance(it.next())) {
                    return false;
                }
            }
            return true;
        }

        private static boolean shouldConvert(Product p) {
            if (p instanceof ExprId || p instanceof StructField || p instanceof CatalystIdentifier
                    || p instanceof AliasIdentifier || p instanceof JoinType || p instanceof BucketSpec
                    || p instanceof CatalogTable || p instanceof Partitioning || p instanceof FunctionResource
                    || p instanceof BroadcastMode || p instanceof CatalogTableType
                    || p instanceof CatalogStorageFormat) {
                return true;
            }
            Iterator<Object> it = p.productIterator();
            while (it.hasNext()) {
                if (it.next() instanceof TreeNode) {
                    return true;
                }
            }
            return false;
        }

        /** A product Spark writes field by field; on an error Spark writes null, and so does this. */
        private void product(Product p) throws ReflectiveOperationException {
            int mark = out.length();
            try {
                String[] names = NAMES.get(p.getClass());
                Object[] values;
                if (p.productArity() == names.length) {
                    values = elements(p, null);
                } else {
                    values = new Object[names.length];
                    for (int i = 0; i < names.length; i++) {
                        java.lang.reflect.Field field = p.getClass().getDeclaredField(names[i]);
                        field.setAccessible(true);
                        values[i] = field.get(p);
                    }
                }
                out.append("{\"product-class\":");
                string(p.getClass().getName());
                for (int i = 0; i < names.length; i++) {
                    int fieldMark = out.length();
                    out.append(',');
                    string(names[i]);
                    out.append(':');
                    if (!value(values[i])) {
                        out.setLength(fieldMark);
                    }
                }
                out.append('}');
            } catch (RuntimeException | ReflectiveOperationException e) {
                out.setLength(mark);
                out.append("null");
            }
        }

        /*
         * json4s values are read as the Scala case classes they are (Product), by simple class name: Spark 4
         * has json4s 4 (org.json4s.JValue), Spark 3.5 has json4s 3.7 (org.json4s.JsonAST.JValue, aliased in a
         * Scala package object Java cannot see), and naming either type compiles against one Spark only.
         */

        /** Fields a node wrote itself (a list of (name, json4s value) pairs). */
        private void jfields(scala.collection.immutable.List<?> fields) {
            Iterator<?> it = fields.iterator();
            while (it.hasNext()) {
                Tuple2<?, ?> field = (Tuple2<?, ?>) it.next();
                if (isJNothing(field._2())) {
                    continue;
                }
                out.append(',');
                string((String) field._1());
                out.append(':');
                jvalue(field._2());
            }
        }

        private static boolean isJNothing(Object v) {
            return v != null && "JNothing$".equals(v.getClass().getSimpleName());
        }

        /** A json4s value as json4s-jackson's JValueSerializer writes it. */
        private void jvalue(Object v) {
            String kind = v == null ? "JNull$" : v.getClass().getSimpleName();
            Object x = v instanceof Product && ((Product) v).productArity() > 0 ? ((Product) v).productElement(0) : null;
            switch (kind) {
                case "JNull$": out.append("null"); break;
                case "JString": string((String) x); break;
                case "JInt": out.append(((scala.math.BigInt) x).bigInteger().toString()); break;
                case "JLong": case "JBool": out.append(x); break;
                case "JDouble": number((Double) x); break;
                case "JDecimal": out.append(((scala.math.BigDecimal) x).bigDecimal().toString()); break;
                case "JObject":
                    out.append('{');
                    int mark = out.length();
                    jfields((scala.collection.immutable.List<?>) x);
                    if (out.length() > mark) {
                        out.deleteCharAt(mark);  // the comma before the first field
                    }
                    out.append('}');
                    break;
                case "JArray": jarray(((scala.collection.immutable.List<?>) x).iterator()); break;
                case "JSet": jarray(((scala.collection.immutable.Set<?>) x).iterator()); break;
                default: throw new IllegalArgumentException("unknown JSON value " + v.getClass().getName());
            }
        }

        private void jarray(Iterator<?> it) {
            out.append('[');
            boolean first = true;
            while (it.hasNext()) {
                Object v = it.next();
                if (isJNothing(v)) {
                    continue;
                }
                if (!first) {
                    out.append(',');
                }
                jvalue(v);
                first = false;
            }
            out.append(']');
        }

        /** Jackson's writeNumber(double): Double.toString, and non-finite numbers as strings. */
        private void number(double d) {
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                string(Double.toString(d));
            } else {
                out.append(Double.toString(d));
            }
        }

        /** A string as Jackson escapes it by default: quote, backslash and control characters only. */
        private void string(String s) {
            out.append('"');
            int n = s.length();
            int start = 0;
            for (int i = 0; i < n; i++) {
                char c = s.charAt(i);
                if (c >= 0x20 && c != '"' && c != '\\') {
                    continue;
                }
                out.append(s, start, i);
                start = i + 1;
                switch (c) {
                    case '"': out.append("\\\""); break;
                    case '\\': out.append("\\\\"); break;
                    case '\b': out.append("\\b"); break;
                    case '\t': out.append("\\t"); break;
                    case '\n': out.append("\\n"); break;
                    case '\f': out.append("\\f"); break;
                    case '\r': out.append("\\r"); break;
                    default: out.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 0xF]);
                }
            }
            out.append(s, start, n);
            out.append('"');
        }
    }
}
