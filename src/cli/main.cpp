// frank: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "commands.h"
#include "frank/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"frank: DeepSeek-V4 inference server, engine and lab"};
  app.require_subcommand(1);
  frank::cli::register_serve(app);
  frank::cli::register_generate(app);
  frank::cli::register_logits(app);
  frank::cli::register_tokenize(app);
  frank::cli::register_chat_encode(app);
  frank::cli::register_plan(app);
  frank::cli::register_lab(app);
  frank::cli::register_bench(app);
  frank::cli::register_kv_capacity(app);
  frank::cli::register_make_pack(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; every other command-line mistake is an error like
    // any other: `error: ...` and exit status 1 (CLI11 would use its own codes, 100 and up).
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "error: " << e.what() << "\n(see frank --help, or frank SUBCOMMAND --help)\n";
    return 1;
  } catch (const frank::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
