// libadjoint.so is made of the whole static layer libraries (see CMakeLists.txt); a shared
// library target still needs one source file of its own, and this is it.
namespace adjoint {
extern const char* const kSharedLibraryName = "libadjoint";
}  // namespace adjoint
