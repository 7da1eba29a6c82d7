/** Options of the HTTP surface and operator's dashboard a node serves when the application asks. */
package io.queen.embedded.http;
