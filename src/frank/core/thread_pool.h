#pragma once
// A fixed set of worker threads for data-parallel loops (the CPU expert runtime splits the rows of
// the experts a step needs over them). The calling thread takes part, so a pool of n threads runs
// n - 1 workers. Workers can be pinned to cores 0..n-1 so that a step's memory streams stay on the
// cores that started them.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace frank {

class ThreadPool {
 public:
  // threads >= 1 (0: all hardware threads). pin: bind thread i to CPU i (Linux; ignored if it fails).
  explicit ThreadPool(unsigned threads = 0, bool pin = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }
  // Runs task(0) .. task(tasks - 1) over all threads; returns when all are done. The first
  // exception a task throws is rethrown here (the other tasks still run).
  void parallel_for(int64_t tasks, const std::function<void(int64_t)>& task);

 private:
  void work(unsigned index);
  void drain();  // takes tasks until none are left

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int64_t)>* task_ = nullptr;
  int64_t tasks_ = 0, next_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
};

}  // namespace frank
