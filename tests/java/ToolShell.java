// Runs Kafka's command-line tools one after another in one JVM, so that a test running dozens
// of them pays for one JVM start and one class loading instead of one per command.
//
// Protocol (tests/integration/kafka_jvm.py, ToolShell): the shell prints "READY" once, then for
// each line on stdin, the tool's main class and its arguments separated by NUL characters, runs
// that class's main method and prints "EXIT <code> <stdout bytes> <stderr bytes>" followed by
// the tool's stdout and stderr, in UTF-8. The exit code is the first one the tool asked for
// through Kafka's Exit (what the JVM would have exited with), 0 when main returned, 1 when it
// threw; what a tool prints after asking to exit is dropped, as a real exit would. Tools read
// an empty stdin.

import org.apache.kafka.common.utils.Exit;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

public class ToolShell {
    /** Thrown where a tool asks the JVM to exit: unwinds the tool's main method. */
    static final class ExitRequested extends Error {
        ExitRequested() {
            super(null, null, false, false);
        }
    }

    /** Where System.out or System.err writes for the command being run. */
    static final class Redirect extends OutputStream {
        volatile OutputStream target = OutputStream.nullOutputStream();

        @Override
        public void write(int b) {
            try {
                target.write(b);
            } catch (java.io.IOException e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        public void write(byte[] b, int off, int len) {
            try {
                target.write(b, off, len);
            } catch (java.io.IOException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    static final Redirect OUT = new Redirect();
    static final Redirect ERR = new Redirect();
    static volatile Integer exitCode;

    public static void main(String[] arguments) throws Exception {
        PrintStream protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        // Installed before any tool class loads: Scala's Console and log4j keep the streams
        // they first see.
        System.setOut(new PrintStream(OUT, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(ERR, true, StandardCharsets.UTF_8));
        Exit.Procedure exit = (code, message) -> {
            if (exitCode == null) {
                exitCode = code;
                OUT.target = OutputStream.nullOutputStream();
                ERR.target = OutputStream.nullOutputStream();
            }
            throw new ExitRequested();
        };
        Exit.setExitProcedure(exit);
        Exit.setHaltProcedure(exit);
        protocol.print("READY\n");
        protocol.flush();
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = commands.readLine()) != null) {
            String[] words = line.split("\u0000", -1);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            int code = run(words[0], Arrays.copyOfRange(words, 1, words.length), out, err);
            byte[] outBytes = out.toByteArray();
            byte[] errBytes = err.toByteArray();
            protocol.print("EXIT " + code + " " + outBytes.length + " " + errBytes.length + "\n");
            protocol.write(outBytes, 0, outBytes.length);
            protocol.write(errBytes, 0, errBytes.length);
            protocol.flush();
        }
    }

    static int run(String mainClass, String[] arguments, ByteArrayOutputStream out, ByteArrayOutputStream err) {
        exitCode = null;
        OUT.target = out;
        ERR.target = err;
        System.setIn(new ByteArrayInputStream(new byte[0]));
        int code = 0;
        try {
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) arguments);
        } catch (InvocationTargetException e) {
            if (!(e.getCause() instanceof ExitRequested)) {
                e.getCause().printStackTrace(System.err);
                code = 1;
            }
        } catch (ReflectiveOperationException e) {
            e.printStackTrace(System.err);
            code = 1;
        } finally {
            System.out.flush();
            System.err.flush();
            OUT.target = OutputStream.nullOutputStream();
            ERR.target = OutputStream.nullOutputStream();
        }
        return exitCode != null ? exitCode : code;
    }
}
