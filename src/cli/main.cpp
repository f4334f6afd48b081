// frank: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "commands.h"
#include "frank/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"frank: DeepSeek-V4 inference engine"};
  app.require_subcommand(1);
  frank::cli::register_logits(app);
  frank::cli::register_generate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const frank::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
