package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.wire.bson.BsonEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * The size bound of a real server's reply batches: a {@code find} or {@code getMore} returns
 * documents up to 16 MiB in all (at least one), whatever the batch size asked, and the rest on the
 * next {@code getMore}. The stock server counts documents only, so a read of large documents came
 * back in one reply, and a client never saw the round trips a real server makes it take (there,
 * a chunk of 1,000 documents of 1 MB is some sixty round trips).
 *
 * <p>A batch that is cut continues under a cursor id of its own (from the server's registry, so it
 * never collides): its {@code getMore} is answered from what was cut, then from the stock cursor
 * behind it, if that one is still open. {@code killCursors} of such an id forgets it and kills the
 * stock cursor.
 */
final class ReplyBatches {
  /** A real server's bound of a reply batch: the BSON limit of a user document. */
  static final int MAX_BATCH_BYTES = 16 * 1024 * 1024;

  private final CursorRegistry registry;
  private final Map<Long, Cut> cuts = new ConcurrentHashMap<>();

  /** What a cut batch left: documents to hand out first, then the stock cursor (0: none). */
  private static final class Cut {
    final Deque<Document> left = new ArrayDeque<>();
    long stockId;
    String ns;
  }

  ReplyBatches(CursorRegistry registry) {
    this.registry = registry;
  }

  /** Whether {@code getMore} of {@code cursorId} is answered here. */
  boolean owns(Object cursorId) {
    return cursorId instanceof Long id && cuts.containsKey(id);
  }

  /** The reply of {@code query}, a {@code find}, its first batch cut at {@link #MAX_BATCH_BYTES}. */
  Document find(Document query, Document reply) {
    return Boolean.TRUE.equals(query.get("singleBatch")) ? reply : firstBatch(reply, Integer.MAX_VALUE);
  }

  /**
   * The reply of a {@code find} or {@code aggregate}, its first batch cut at {@code maxCount}
   * documents and {@link #MAX_BATCH_BYTES}; what is cut is served by the {@code getMore}s after it.
   */
  Document firstBatch(Document reply, int maxCount) {
    if (reply == null || !(reply.get("cursor") instanceof Document cursor)
        || !(cursor.get("firstBatch") instanceof List<?> batch) || batch.size() <= maxCount && fits(batch)) {
      return reply;
    }
    Cut cut = new Cut();
    cut.stockId = cursor.get("id") instanceof Long id ? id : 0L;
    cut.ns = String.valueOf(cursor.get("ns"));
    cursor.put("firstBatch", take(new ArrayDeque<>(documents(batch)), maxCount, cut.left));
    long id = registry.generateCursorId();
    cuts.put(id, cut);
    cursor.put("id", id);
    return reply;
  }

  /**
   * The reply of a {@code getMore} of a cut cursor: what was cut first, then the stock cursor's
   * next batch (through {@code stock}, which runs a {@code getMore} of the given id), each cut again.
   */
  Document getMore(Document query, Function<Long, Document> stock) {
    long id = (Long) query.get("getMore");
    Cut cut = cuts.get(id);
    int batchSize = query.get("batchSize") instanceof Number n && n.intValue() > 0 ? n.intValue() : Integer.MAX_VALUE;
    if (cut.left.isEmpty() && cut.stockId != 0) {
      Document reply = stock.apply(cut.stockId);
      if (reply.get("cursor") instanceof Document c && c.get("nextBatch") instanceof List<?> batch) {
        cut.left.addAll(documents(batch));
        cut.stockId = c.get("id") instanceof Long more ? more : 0L;
      }
    }
    List<Document> next = take(cut.left, batchSize, cut.left);
    boolean more = !cut.left.isEmpty() || cut.stockId != 0;
    if (!more) {
      cuts.remove(id);
    }
    return new Document("cursor", new Document("id", more ? id : 0L).append("ns", cut.ns).append("nextBatch", next))
        .append("ok", 1.0);
  }

  /**
   * Forgets the cut cursors among {@code ids} and says which stock cursors to kill instead.
   *
   * @return {@code ids} with each cut cursor replaced by its stock cursor (if still open)
   */
  List<Object> kill(List<?> ids) {
    List<Object> stock = new ArrayList<>();
    for (Object o : ids) {
      Cut cut = o instanceof Long id ? cuts.remove(id) : null;
      if (cut == null) {
        stock.add(o);
      } else if (cut.stockId != 0) {
        stock.add(cut.stockId);
      }
    }
    return stock;
  }

  /**
   * Takes documents from the front of {@code from} while they fit (at least one, at most
   * {@code count}); the rest stay in {@code from}, and {@code rest} receives them when given a
   * separate deque.
   */
  private static List<Document> take(Deque<Document> from, int count, Deque<Document> rest) {
    List<Document> out = new ArrayList<>();
    long bytes = 0;
    while (!from.isEmpty() && out.size() < count) {
      int size = size(from.peekFirst());
      if (!out.isEmpty() && bytes + size > MAX_BATCH_BYTES) {
        break;
      }
      bytes += size;
      out.add(from.pollFirst());
    }
    if (rest != from) {
      rest.addAll(from);
      from.clear();
    }
    return out;
  }

  private static boolean fits(List<?> batch) {
    long bytes = 0;
    for (Object o : batch) {
      bytes += o instanceof Document d ? size(d) : 0;
      if (bytes > MAX_BATCH_BYTES) {
        return false;
      }
    }
    return true;
  }

  private static List<Document> documents(List<?> batch) {
    return batch.stream().map(o -> (Document) o).toList();
  }

  private static int size(Document document) {
    ByteBuf buffer = Unpooled.buffer();
    try {
      BsonEncoder.encodeDocument(document, buffer);
      return buffer.writerIndex();
    } finally {
      buffer.release();
    }
  }
}
