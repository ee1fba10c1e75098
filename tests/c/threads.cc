/*
 * threads.cc: C++ std::threads, each with its own communicator (ADDR port
 * + 1 + i), calling AllGather and Barrier concurrently (run with N = 2).
 * Threads also create their communicators concurrently, half of them by
 * address and half from a unique id handed over through a file.
 */
#include "mscclpp.h"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check.h"

namespace {

std::mutex printMu;
std::atomic<int> failures{0};

void fail(const std::string& what)
{
  std::lock_guard<std::mutex> lock(printMu);
  std::printf("FAILED: %s\n", what.c_str());
  failures++;
}

uint8_t pattern(int r, int i, int it, int th)
{
  return (uint8_t)(r * 41 + i * 5 + it * 3 + th * 101);
}

void worker(int th, int rank, int nranks, int rounds)
{
  mscclppComm_t comm = nullptr;
  mscclppResult_t res;
  if (th % 2 == 0) {
    res = mscclppCommInitRank(&comm, nranks, test_addr_plus(1 + th), rank);
  } else {
    mscclppUniqueId id;
    std::string name = "uid." + std::to_string(th);
    if (rank == 0) {
      res = mscclppGetUniqueId(&id);
      if (res == mscclppSuccess && test_publish_id(name.c_str(), &id) != 0)
        res = mscclppSystemError;
    } else {
      res = test_fetch_id(name.c_str(), &id, 30) == 0 ? mscclppSuccess : mscclppSystemError;
    }
    if (res == mscclppSuccess)
      res = mscclppCommInitRankFromId(&comm, nranks, id, rank);
  }
  if (res != mscclppSuccess) {
    fail("thread " + std::to_string(th) + ": init: " + mscclppGetErrorString(res) + ": " + test_last_error(nullptr));
    return;
  }
  for (int it = 0; it < rounds; it++) {
    int size = 32 + 17 * th + it % 7;
    std::vector<uint8_t> buf((size_t)nranks * size, 0);
    for (int i = 0; i < size; i++)
      buf[(size_t)rank * size + i] = pattern(rank, i, it, th);
    res = mscclppBootstrapAllGather(comm, buf.data(), size);
    if (res != mscclppSuccess) {
      fail("thread " + std::to_string(th) + " round " + std::to_string(it) + ": AllGather: " +
           mscclppGetErrorString(res) + ": " + test_last_error(comm));
      break;
    }
    int wrong = 0;
    for (int r = 0; r < nranks; r++)
      for (int i = 0; i < size; i++)
        wrong += buf[(size_t)r * size + i] != pattern(r, i, it, th);
    if (wrong) {
      fail("thread " + std::to_string(th) + " round " + std::to_string(it) + ": " + std::to_string(wrong) +
           " wrong bytes");
      break;
    }
    if (it % 4 == 3 && (res = mscclppBootstrapBarrier(comm)) != mscclppSuccess) {
      fail("thread " + std::to_string(th) + ": Barrier: " + mscclppGetErrorString(res));
      break;
    }
  }
  res = mscclppCommDestroy(comm);
  if (res != mscclppSuccess)
    fail("thread " + std::to_string(th) + ": destroy: " + mscclppGetErrorString(res));
}

} // namespace

int main()
{
  test_init("threads.cc");
  int rank = test_rank(), nranks = test_nranks();
  const int nthreads = 6, rounds = 40;
  double t0 = test_now();
  std::vector<std::thread> threads;
  for (int th = 0; th < nthreads; th++)
    threads.emplace_back(worker, th, rank, nranks, rounds);
  for (auto& t : threads)
    t.join();
  double dt = test_now() - t0;
  CHECK(failures.load() == 0, "%d thread failures", failures.load());
  if (failures.load() == 0)
    std::printf("ok   %d std::threads x %d rounds of AllGather on their own communicators (%.2f s)\n", nthreads,
                rounds, dt);
  return test_finish();
}
