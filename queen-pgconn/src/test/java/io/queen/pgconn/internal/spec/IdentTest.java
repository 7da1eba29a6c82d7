package io.queen.pgconn.internal.spec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The one quoting helper: the allow-list for configured names, doubling for catalog names. */
class IdentTest {

  @Test
  void aConfiguredNameIsQuotedAsWrittenCaseKeptAndOneOutsideTheRuleIsRefusedNamingIt() {
    assertThat(Ident.quote("Sales")).isEqualTo("\"Sales\"");
    assertThat(Ident.quote("queen")).isEqualTo("\"queen\"");
    assertThatThrownBy(() -> Ident.quote("sa\"les")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(Ident.RULE.pattern());
    assertThatThrownBy(() -> Ident.quote("Queen's schema", "q\"; drop table x; --"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("Queen's schema: given")
        .hasMessageContaining(Ident.RULE.pattern());
    assertThatThrownBy(() -> Ident.quote("Queen's schema", null)).hasMessageContaining("given nothing");
    assertThatThrownBy(() -> Ident.quote("x".repeat(64))).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aCatalogNameHasItsDoubleQuotesDoubledAndNulOrEmptyIsRefused() {
    assertThat(Ident.quoteCatalogName("a\"b")).isEqualTo("\"a\"\"b\"");
    assertThat(Ident.quoteCatalogName("unit price")).isEqualTo("\"unit price\"");
    assertThatThrownBy(() -> Ident.quoteCatalogName("a\0b")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Ident.quoteCatalogName("")).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aNameInAMessageIsBareOnlyWhereSqlWouldKeepItAsWritten() {
    assertThat(Ident.written("src_role")).isEqualTo("src_role");
    assertThat(Ident.written("Src Role")).isEqualTo("\"Src Role\"");
    assertThat(Ident.written("a\"b")).isEqualTo("\"a\"\"b\"");
  }
}
