package io.queen.embedded.internal;

import io.queen.ConsumerBuilder;
import io.queen.Names;
import io.queen.PartitionClient;
import io.queen.PushItem;
import io.queen.PushResult;
import io.queen.Queen;
import io.queen.QueueClient;
import io.queen.QueueConfig;
import io.queen.embedded.internal.consume.ConsumerBuilderImpl;
import io.queen.embedded.internal.consume.ConsumerNode;
import io.queen.embedded.internal.ops.StatusReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.UnaryOperator;

/** A queue handle: holds the name, the node's consume side (its log, its open check) and the status reader. */
public final class QueueClientImpl implements QueueClient {
  private final ConsumerNode node;
  private final StatusReader status;
  private final String name;

  QueueClientImpl(ConsumerNode node, StatusReader status, String name) {
    this.node = node;
    this.status = status;
    this.name = Names.queue(name);
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public QueueConfig configure(UnaryOperator<QueueConfig.Builder> change) {
    Objects.requireNonNull(change, "change must not be null");
    node.checkOpen();
    QueueConfig.Builder b = Objects.requireNonNull(change.apply(config().toBuilder()), "the builder returned by change");
    QueueConfig cfg = b.build();
    node.broker().catalogue().configure(name, cfg);
    return cfg;
  }

  @Override
  public QueueConfig config() {
    node.checkOpen();
    return node.broker().catalogue().config(name);
  }

  @Override
  public List<io.queen.Status.PartitionStatus> partitions(String after, int limit) {
    node.checkOpen();
    if (limit < 1 || limit > 1000) {
      throw new IllegalArgumentException("limit must be 1..1000, was " + limit);
    }
    return status.partitions(name, after, limit);
  }

  @Override
  public PartitionClient partition(String partition) {
    return new PartitionClientImpl(this, Names.partition(partition));
  }

  @Override
  public PushResult push(Object payload) {
    if (payload instanceof PushItem item) {
      return push(List.of(item)).get(0);
    }
    return push(List.of(PushItem.of(single(payload)))).get(0);
  }

  /**
   * A collection given to a one-message push is almost always a batch pushed by mistake as one message (a
   * JSON array): refused, with the call that was meant. A JSON array as one payload goes as a JsonNode or Json.
   */
  static Object single(Object payload) {
    if (payload instanceof java.util.Collection<?> || (payload != null && payload.getClass().isArray())) {
      throw new IllegalArgumentException("push(payload) was given a " + payload.getClass().getSimpleName()
          + ", which would be stored as ONE message holding a JSON array: to push several messages use"
          + " push(List<PushItem>) or partition(p).pushAll(list); to store one array, pass a JsonNode or Json.of(text)");
    }
    return payload;
  }

  @Override
  public List<PushResult> push(List<PushItem> items) {
    Objects.requireNonNull(items, "items must not be null");
    node.checkOpen();
    List<PushItem> own = new ArrayList<>(items.size());
    for (int i = 0; i < items.size(); i++) {
      PushItem it = Objects.requireNonNull(items.get(i), "items[" + i + "]");
      if (it.queue() != null && !it.queue().equals(name)) {
        throw new IllegalArgumentException("items[" + i + "].queue is '" + it.queue() + "' but this is queue '" + name
            + "': use Queen.push(List) for batches that span queues");
      }
      own.add(it);
    }
    return node.broker().pushes().push(own, name);
  }

  @Override
  public ConsumerBuilder consumer() {
    return new ConsumerBuilderImpl(node, name, Queen.DEFAULT_GROUP);
  }

  @Override
  public ConsumerBuilder group(String group) {
    return new ConsumerBuilderImpl(node, name, Names.group(group));
  }

  @Override
  public void delete() {
    node.checkOpen();
    node.broker().catalogue().deleteQueue(name);
  }

  @Override
  public String toString() {
    return "Queue[" + name + "]";
  }

  /** One partition. */
  static final class PartitionClientImpl implements PartitionClient {
    private final QueueClientImpl queue;
    private final String partition;

    PartitionClientImpl(QueueClientImpl queue, String partition) {
      this.queue = queue;
      this.partition = partition;
    }

    @Override
    public PushResult push(Object payload) {
      if (payload instanceof PushItem) {
        return push((PushItem) payload);
      }
      return queue.push(List.of(PushItem.of(partition, QueueClientImpl.single(payload)))).get(0);
    }

    @Override
    public PushResult push(PushItem item) {
      Objects.requireNonNull(item, "item must not be null");
      return queue.push(List.of(new PushItem(null, partition, item.payload(), item.transactionId(), item.traceId()))).get(0);
    }

    @Override
    public List<PushResult> pushAll(List<?> payloads) {
      Objects.requireNonNull(payloads, "payloads must not be null");
      List<PushItem> items = new ArrayList<>(payloads.size());
      for (Object p : payloads) {
        items.add(p instanceof PushItem it ? new PushItem(null, partition, it.payload(), it.transactionId(), it.traceId())
            : PushItem.of(partition, p));
      }
      return queue.push(items);
    }
  }
}
