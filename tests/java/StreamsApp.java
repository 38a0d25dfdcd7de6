// A Kafka Streams application for Moldau's tests, run with the `java` launcher from this single
// source file: java -cp 'tests/java/lib/4.1.1/*' tests/java/StreamsApp.java TOPOLOGY BOOTSTRAP
// INPUT OUTPUT APPLICATION_ID STATE_DIR REPLICATION_FACTOR
//
// TOPOLOGY is
//   word-count  lines in, one count per word out (the words are re-keyed: a repartition topic,
//               and the counts' changelog);
//   windowed    a count per key and 10-second tumbling window of the records' own timestamps,
//               keyed "key@window-start" on the way out.
// exactly_once_v2, no record cache (every input record updates its count once, so the output of a
// key is 1, 2, 3, ... exactly when nothing was duplicated or lost). Prints "RUNNING" when the
// instance first runs and stops cleanly on SIGTERM.

import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

public class StreamsApp {
    public static void main(String[] args) throws InterruptedException {
        String topology = args[0];
        String input = args[2];
        String output = args[3];

        Properties config = new Properties();
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, args[4]);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, args[6]);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        config.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        config.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        config.put(StreamsConfig.producerPrefix("delivery.timeout.ms"), 120000);
        config.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 30000);

        StreamsBuilder builder = new StreamsBuilder();
        var records = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        if (topology.equals("word-count")) {
            records
                .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\s+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        } else if (topology.equals("windowed")) {
            records
                .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
                .count()
                .toStream()
                .map((window, count) -> KeyValue.pair(
                    window.key() + "@" + window.window().start(), Long.toString(count)))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        } else {
            throw new IllegalArgumentException("unknown topology " + topology);
        }

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && before == KafkaStreams.State.REBALANCING) {
                System.out.println("RUNNING");
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR) {
                System.out.println("ERROR");
                System.out.flush();
            }
        });
        streams.setUncaughtExceptionHandler(error -> {
            error.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }
}
