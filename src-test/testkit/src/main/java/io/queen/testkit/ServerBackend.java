package io.queen.testkit;

/**
 * One running PostgreSQL server as {@link PostgresServer} sees it: where it listens, whom to log in as, and how to stop it.
 * Implemented by {@link EmbeddedBackend}, {@link ExternalBackend} and {@link TestcontainersBackend}.
 */
interface ServerBackend {

    /** The kind of server, for {@link PostgresServer#kind()}. */
    PostgresServer.Kind kind();

    /** Host name of the first (or only) host. */
    String host();

    /** Port of the first (or only) host. */
    int port();

    /** User with the right to create and drop databases; may be null when the URL carries it. */
    String user();

    /** Password of {@link #user()}; may be null. */
    String password();

    /** The database the kit connects to in order to create and drop test databases. */
    String adminDatabase();

    /** A pgjdbc URL pointing at {@code database} on this server. */
    String jdbcUrl(String database);

    /** Where the server runs, for {@link PostgresServer#describe()}, e.g. "on port 12345". */
    String location();

    /** Stops the server if the kit started it; never throws. */
    void close();
}
