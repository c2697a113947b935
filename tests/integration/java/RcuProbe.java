import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/** Prints what Java's RemoteClusterUtils sees on a cluster, one tab-separated fact per line. */
public class RcuProbe {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        String cmd = args[1];
        if (cmd.equals("translate")) {
            Map<TopicPartition, OffsetAndMetadata> m =
                RemoteClusterUtils.translateOffsets(props, args[2], args[3], Duration.ofSeconds(20));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) {
                System.out.println("offset\t" + e.getKey().topic() + "\t" + e.getKey().partition() + "\t"
                    + e.getValue().offset() + "\t" + e.getValue().metadata());
            }
        } else if (cmd.equals("topology")) {
            for (String s : new TreeSet<>(RemoteClusterUtils.upstreamClusters(props))) System.out.println("upstream\t" + s);
            for (String s : new TreeSet<>(RemoteClusterUtils.heartbeatTopics(props))) System.out.println("heartbeats\t" + s);
            for (String s : new TreeSet<>(RemoteClusterUtils.checkpointTopics(props))) System.out.println("checkpoints\t" + s);
            for (int i = 2; i < args.length; i++) {
                System.out.println("hops\t" + args[i] + "\t" + RemoteClusterUtils.replicationHops(props, args[i]));
            }
        }
        System.out.println("done");
    }
}
