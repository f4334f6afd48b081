#include "frank/server/job_stream.h"

#include <iostream>

namespace frank::server {
namespace {

// Writes the job's events until it ends (true) or the client is gone (false). Only a write
// notices a closed connection, so when nothing was written for `heartbeat_every` (a response
// that is built at the end, or a job still queued) the writer's heartbeat is sent.
bool relay(Job& job, ResponseWriter& writer, std::chrono::milliseconds heartbeat_every, httplib::DataSink& sink) {
  auto last_write = Clock::now();
  auto write = [&](const std::string& bytes) {
    if (bytes.empty()) return true;
    last_write = Clock::now();
    if (sink.write(bytes.data(), bytes.size())) return true;
    job.request_stop(Job::StopRequest::ClientGone);
    return false;
  };
  for (;;) {
    auto event = job.next(heartbeat_every);
    if (event && std::holds_alternative<JobEnd>(*event)) {
      if (!write(writer.on_end(std::get<JobEnd>(*event)))) return false;
      sink.done();
      return true;
    }
    if (event) {
      if (!write(writer.on_token(std::get<TokenEvent>(*event)))) return false;
      if (writer.satisfied()) job.request_stop(Job::StopRequest::Satisfied);
    }
    if (Clock::now() - last_write >= heartbeat_every && !write(writer.heartbeat())) return false;
  }
}

}  // namespace

void relay_job(httplib::Response& res, const char* content_type, std::shared_ptr<Job> job,
               std::shared_ptr<ResponseWriter> writer, std::chrono::milliseconds heartbeat_every) {
  res.set_chunked_content_provider(content_type, [job, writer, heartbeat_every](size_t, httplib::DataSink& sink) {
    // Nothing may escape into httplib's thread: a failure here ends the response and the job.
    try {
      return relay(*job, *writer, heartbeat_every, sink);
    } catch (const std::exception& e) {
      std::cerr << "response failed: " << e.what() << "\n";
      job->request_stop(Job::StopRequest::ClientGone);
      return false;
    }
  });
}

}  // namespace frank::server
