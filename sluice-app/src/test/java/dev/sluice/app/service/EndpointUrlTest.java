package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import org.junit.jupiter.api.Test;

/** The endpoint's address is printed as a URL that works, whatever {@code http.host} says. */
class EndpointUrlTest {

  @Test
  void aWildcardAddressIsPrintedAsThisMachinesLoopbackAndIpv6IsBracketed() throws Exception {
    assertThat(SluiceService.url(new InetSocketAddress(InetAddress.getByName("0.0.0.0"), 9464)))
        .isEqualTo("http://127.0.0.1:9464");
    assertThat(SluiceService.url(new InetSocketAddress(InetAddress.getByName("::"), 32809)))
        .as("was http://0:0:0:0:0:0:0:0:32809").isEqualTo("http://127.0.0.1:32809");
    assertThat(SluiceService.url(new InetSocketAddress(InetAddress.getByName("::1"), 9464)))
        .isEqualTo("http://[0:0:0:0:0:0:0:1]:9464");
    assertThat(SluiceService.url(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 9464)))
        .isEqualTo("http://127.0.0.1:9464");
  }
}
