"""stepforge.cocotb_tests"""
