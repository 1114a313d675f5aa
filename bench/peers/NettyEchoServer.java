// NettyEchoServer: the Netty 4.1 peer, NIO transport (NioSocketChannel), one event loop.
//
// Written as the Netty echo example is: the inbound ByteBuf is written back as-is (no copy)
// and flushed once per read batch in channelReadComplete. One NioEventLoopGroup(1) serves
// both the accepting and the connected channels, so the whole server is one I/O thread like
// the other peers. Leak detection stays at Netty's default unless the JVM is told otherwise.
//
// usage: java -cp <netty jars>:. NettyEchoServer [--port N] [--host ADDR]

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;

public final class NettyEchoServer {
  @Sharable
  static final class EchoHandler extends ChannelInboundHandlerAdapter {
    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
      ctx.write(msg);
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
      ctx.flush();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
      // Backpressure: stop reading while the outbound buffer is over its high-water mark,
      // so a slow reader cannot make the server buffer without bound.
      ctx.channel().config().setAutoRead(ctx.channel().isWritable());
      ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
      ctx.close();
    }
  }

  public static void main(String[] args) throws Exception {
    String host = "127.0.0.1";
    int port = 7000;
    for (int i = 0; i < args.length; ++i) {
      if (args[i].equals("--port") && i + 1 < args.length) port = Integer.parseInt(args[++i]);
      else if (args[i].equals("--host") && i + 1 < args.length) host = args[++i];
      else if (!args[i].startsWith("-")) port = Integer.parseInt(args[i]);
      else {
        System.err.println("usage: NettyEchoServer [--port N] [--host ADDR]");
        System.exit(1);
      }
    }
    EventLoopGroup group = new NioEventLoopGroup(1);
    EchoHandler handler = new EchoHandler();
    try {
      ServerBootstrap b = new ServerBootstrap();
      b.group(group, group)
          .channel(NioServerSocketChannel.class)
          .option(ChannelOption.SO_BACKLOG, 1024)
          .option(ChannelOption.SO_REUSEADDR, true)
          .childOption(ChannelOption.TCP_NODELAY, true)
          .childHandler(new ChannelInitializer<SocketChannel>() {
            @Override
            public void initChannel(SocketChannel ch) {
              ch.pipeline().addLast(handler);
            }
          });
      Channel ch = b.bind(host, port).sync().channel();
      System.err.println("NettyEchoServer: listening on " + host + ":" + port);
      ch.closeFuture().sync();
    } finally {
      group.shutdownGracefully();
    }
  }
}
