# lit configuration for adjoint's dump tests: each *.test file holds its RUN lines and checks
# what matters with FileCheck. %adjoint is the CLI, FileCheck and not come from llvm-19-tools.
import os
import lit.formats

config.name = "adjoint"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.adjoint_build_dir, "tests", "lit-out")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in"]
config.substitutions.append(("%adjoint", os.path.join(config.adjoint_bin_dir, "adjoint")))
llvm_bin = os.path.dirname(config.filecheck)
config.environment["PATH"] = os.pathsep.join([llvm_bin, config.adjoint_bin_dir,
                                              config.environment.get("PATH", "")])
config.environment["ADJOINT_CACHE_DIR"] = os.path.join(config.adjoint_build_dir, "lit-cache")
