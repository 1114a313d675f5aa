#include <niox/async/task.hpp>

#include <vector>

namespace niox::detail {

namespace {
// The calling thread's coroutines ready to continue, and whether a drain is already running
// further up this thread's stack.
struct ReadyQueue {
  std::vector<std::coroutine_handle<>> handles;
  std::size_t head = 0;
  bool draining = false;
};
thread_local ReadyQueue ready;
}  // namespace

void resume_soon(std::coroutine_handle<> h) {
  ReadyQueue& q = ready;
  if (q.draining) {
    q.handles.push_back(h);
    return;  // the drain below us on this stack resumes it when the current coroutine suspends
  }
  // No drain runs, so nothing waits (a drain ends with the queue empty): `h` goes first
  // without passing through the queue, as it does on a loop's completion.
  q.draining = true;
  h.resume();
  while (q.head < q.handles.size()) {
    std::coroutine_handle<> next = q.handles[q.head++];
    if (q.head == q.handles.size()) {
      // Emptied: start over at the front, so that a long chain keeps the queue a few entries
      // long (and its memory allocated once).
      q.handles.clear();
      q.head = 0;
    }
    next.resume();
  }
  q.draining = false;
}

}  // namespace niox::detail
