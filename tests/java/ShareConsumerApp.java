// A share group member (KIP-932) for Moldau's tests: Kafka 4.1's KafkaShareConsumer, run with the
// `java` launcher from this single source file:
//   java -cp 'tests/java/lib/4.1.1/*' tests/java/ShareConsumerApp.java BOOTSTRAP GROUP TOPIC MODE
//
// It subscribes to TOPIC in share group GROUP with explicit acknowledgement and prints one JSON
// line per event on stdout: {"event":"record","partition":P,"offset":O,"value":"V","delivery":D}
// for every record delivered (before it is acknowledged), {"event":"acknowledged",...} once a
// commit succeeded for it, {"event":"ack-error",...} when one failed, and {"event":"closed"}.
// MODE says what it does with each record:
//   accept   acknowledge it ACCEPT;
//   release  acknowledge it RELEASE (a record that can never be processed);
//   reject   REJECT the records whose value starts with "bad", ACCEPT the others;
//   hold     print the records of its first non-empty poll, then acknowledge nothing and poll
//            no more (a member that hangs while it holds them);
//   implicit acknowledge nothing itself: the consumer's implicit mode accepts what a poll
//            delivered on the next poll (and on close).
// It stops cleanly on SIGTERM (closing the consumer, which releases what it holds).

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsumerApp {
    public static void main(String[] args) throws InterruptedException {
        String mode = args[3];
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("group.id", args[1]);
        config.put("client.id", "share-" + mode + "-" + ProcessHandle.current().pid());
        config.put("share.acknowledgement.mode", mode.equals("implicit") ? "implicit" : "explicit");
        config.put("max.poll.records", "50");

        KafkaShareConsumer<String, String> consumer =
            new KafkaShareConsumer<>(config, new StringDeserializer(), new StringDeserializer());
        AtomicBoolean stopping = new AtomicBoolean();
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            consumer.subscribe(List.of(args[2]));
            emit("{\"event\":\"subscribed\"}");
            boolean holding = false;
            while (!stopping.get()) {
                if (holding) {
                    Thread.sleep(100);
                    continue;
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> record : records) {
                    emit(describe("record", record));
                    if (mode.equals("hold") || mode.equals("implicit")) {
                        continue;
                    }
                    consumer.acknowledge(record, typeFor(mode, record.value()));
                }
                if (records.isEmpty() || mode.equals("implicit")) {
                    continue;
                }
                if (mode.equals("hold")) {
                    holding = true;
                    continue;
                }
                Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
                for (ConsumerRecord<String, String> record : records) {
                    Optional<KafkaException> error = errorFor(results, record);
                    emit(error.isPresent()
                        ? describe("ack-error", record).replace("}", ",\"error\":\""
                            + error.get().getClass().getSimpleName() + "\"}")
                        : describe("acknowledged", record));
                }
            }
        } catch (WakeupException expected) {
            // stopping
        } finally {
            consumer.close(Duration.ofSeconds(10));
            emit("{\"event\":\"closed\"}");
            closed.countDown();
        }
    }

    private static Optional<KafkaException> errorFor(
            Map<TopicIdPartition, Optional<KafkaException>> results,
            ConsumerRecord<String, String> record) {
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> result : results.entrySet()) {
            TopicIdPartition where = result.getKey();
            if (where.topic().equals(record.topic()) && where.partition() == record.partition()) {
                return result.getValue();
            }
        }
        return Optional.empty();
    }

    private static AcknowledgeType typeFor(String mode, String value) {
        switch (mode) {
            case "release":
                return AcknowledgeType.RELEASE;
            case "reject":
                return value.startsWith("bad") ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT;
            default:
                return AcknowledgeType.ACCEPT;
        }
    }

    private static String describe(String event, ConsumerRecord<String, String> record) {
        return String.format(
            "{\"event\":\"%s\",\"partition\":%d,\"offset\":%d,\"value\":\"%s\",\"delivery\":%d}",
            event, record.partition(), record.offset(), record.value(),
            record.deliveryCount().orElse((short) -1));
    }

    private static synchronized void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
