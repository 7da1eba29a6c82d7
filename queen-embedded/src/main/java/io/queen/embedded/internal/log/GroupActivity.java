package io.queen.embedded.internal.log;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The consumer groups this node popped, acknowledged or moved since the activity was last written: kept in memory so
 * that the consume path writes nothing for it; the janitor writes it every few seconds (a group's
 * {@code last_active_at}, at most once a minute), and a group idle past {@code groupIdleExpiry} is removed.
 */
public final class GroupActivity {

  /** A group of a queue. */
  public record Group(String queue, String group) {}

  private final Set<Group> touched = ConcurrentHashMap.newKeySet();

  /** {@code group} of {@code queue} was used now. */
  public void touch(String queue, String group) {
    touched.add(new Group(queue, group));
  }

  /** The groups used since the last call, and forgets them. */
  public List<Group> drain() {
    List<Group> out = new ArrayList<>(touched.size());
    for (Group g : touched) {
      if (touched.remove(g)) {
        out.add(g);
      }
    }
    return out;
  }
}
