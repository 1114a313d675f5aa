// The servers' backpressure: flush once per read batch, and stop reading while the peer does not
// take what was written (the channel is unwritable above the high water mark), so a client that
// only sends cannot make a server queue replies without bound. Reading resumes when the channel
// becomes writable again (below the low water mark). A handler derives from this and writes its
// replies in channel_read.
#pragma once

#include <niox/transport/channel_handler.hpp>

#include <exception>

class BackpressureHandler : public niox::ChannelHandler {
 public:
  void channel_read_complete(niox::ChannelHandlerContext& ctx) override {
    ctx.flush();
    if (!ctx.channel().is_writable()) {
      ctx.channel().config().set_auto_read(false);
    }
  }
  void channel_writability_changed(niox::ChannelHandlerContext& ctx) override {
    if (ctx.channel().is_writable()) {
      ctx.channel().config().set_auto_read(true);
    }
    ctx.fire_channel_writability_changed();
  }
  void exception_caught(niox::ChannelHandlerContext& ctx, std::exception_ptr) override {
    ctx.close();
  }
};
