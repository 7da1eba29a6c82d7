package io.queen.testkit;

/** A tiny main for {@link ChildJvmTest}: prints its arguments and an environment variable, then waits or exits. */
public final class ChildMain {

    private ChildMain() {
    }

    public static void main(String[] args) throws InterruptedException {
        System.out.println("starting " + String.join(",", args));
        System.err.println("greeting=" + System.getenv("CHILD_GREETING"));
        if (args.length > 0 && args[0].equals("exit")) {
            System.exit(Integer.parseInt(args[1]));
        }
        System.out.println("ready pid=" + ProcessHandle.current().pid());
        Thread.sleep(120_000); // until killed; ends by itself if the test forgets
        System.out.println("woke up");
    }
}
