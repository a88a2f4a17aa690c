"""stepforge.hdl"""
